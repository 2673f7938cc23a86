"""Which samples each step uses: an epoch-wise permutation, cut into global batches, each
global batch split evenly over ranks. Everything is a function of (seed, step), so a resumed
run continues at its step and any number of ranks sees the same global batches."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from dpvip.errors import DpvipInputError
from dpvip.seeds import derive


def sample_seed(run_seed: int, epoch: int, index: int) -> int:
    """The seed of one sample's random draws (augmentation, MAE mask) in one epoch."""
    return derive(run_seed, epoch, index)


class EpochBatches:
    """Batch sampler over `num_samples` for steps [start_step, total_steps).

    Yields this rank's share of each global batch as [(index, seed)]; the dataset draws the
    sample's augmentation and mask from `seed`. The last partial batch of an epoch is dropped.
    """

    def __init__(
        self,
        num_samples: int,
        batch_size: int,
        total_steps: int,
        seed: int,
        rank: int = 0,
        world: int = 1,
        start_step: int = 0,
    ):
        if batch_size % world:
            raise DpvipInputError(f"batch size {batch_size} does not divide over {world} ranks")
        if num_samples < batch_size:
            raise DpvipInputError(f"the dataset has {num_samples} samples, fewer than the batch size {batch_size}")
        self.num_samples, self.batch_size, self.total_steps = num_samples, batch_size, total_steps
        self.seed, self.rank, self.world, self.start_step = seed, rank, world, start_step
        self.steps_per_epoch = num_samples // batch_size
        self._permutation: tuple[int, torch.Tensor] | None = None

    def epoch_of(self, step: int) -> int:
        return step // self.steps_per_epoch

    def permutation(self, epoch: int) -> torch.Tensor:
        if self._permutation is None or self._permutation[0] != epoch:
            generator = torch.Generator().manual_seed(derive(self.seed, epoch))
            self._permutation = (epoch, torch.randperm(self.num_samples, generator=generator))
        return self._permutation[1]

    def global_batch(self, step: int) -> list[int]:
        epoch, position = divmod(step, self.steps_per_epoch)
        start = position * self.batch_size
        return self.permutation(epoch)[start : start + self.batch_size].tolist()

    def rank_batch(self, step: int) -> list[tuple[int, int]]:
        share = self.batch_size // self.world
        indices = self.global_batch(step)[self.rank * share : (self.rank + 1) * share]
        epoch = self.epoch_of(step)
        return [(index, sample_seed(self.seed, epoch, index)) for index in indices]

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        for step in range(self.start_step, self.total_steps):
            yield self.rank_batch(step)

    def __len__(self) -> int:
        return max(0, self.total_steps - self.start_step)
