"""Poisson sampling over a dataset, as the accountant assumes: at every step every example is
included independently with probability q.

The index range is cut into fixed blocks of `BLOCK` examples; the inclusions of a block at a
step are drawn from their own generator, seeded by the run's keyed derivation of (inclusion,
step, block) (`dpvip.privacy.randomness`), and block b is drawn
by rank b mod world. So ranks draw independently (each from its own streams), every example
is decided exactly once per step, and the global batch is the same whatever the number of
ranks: a run on 2 GPUs samples what a run on 1 samples.

`PoissonBatches` yields each step's batch as [(index, seed)] (the seed drives the example's
augmentation or mask: dpvip's datasets take such pairs); `IndexBatches` yields the same
batches as plain [index] lists, for `DataLoader(dataset, batch_sampler=...)` over any map-style
`Dataset` (a `TensorDataset`, an `ImageFolder`).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from dpvip.errors import DpvipInputError
from dpvip.privacy.randomness import RunRandomness

BLOCK = 1024


def example_seed(randomness: RunRandomness, step: int, index: int) -> int:
    """The seed of one example's random draws (augmentation, MAE mask) at one step."""
    return randomness.seed("example", step, index)


class PoissonBatches:
    """Batch sampler yielding this rank's examples of each step in [start_step, total_steps)
    as [(index, seed)]; the realised global batch size is Binomial(n, q)."""

    def __init__(
        self,
        num_samples: int,
        sample_rate: float,
        total_steps: int,
        randomness: RunRandomness,
        rank: int = 0,
        world: int = 1,
        start_step: int = 0,
    ):
        if not 0 < sample_rate <= 1:
            raise DpvipInputError(f"sample rate {sample_rate} is outside (0, 1]")
        if num_samples < 1:
            raise DpvipInputError("Poisson sampling needs a dataset with at least one example")
        self.num_samples, self.sample_rate, self.total_steps = num_samples, sample_rate, total_steps
        self.randomness, self.rank, self.world, self.start_step = randomness, rank, world, start_step

    def blocks(self) -> range:
        """The blocks this rank draws."""
        return range(self.rank, -(-self.num_samples // BLOCK), self.world)

    def indices(self, step: int) -> np.ndarray:
        """This rank's included examples at `step`, in increasing order."""
        chosen = []
        for block in self.blocks():
            start = block * BLOCK
            size = min(BLOCK, self.num_samples - start)
            draws = np.random.default_rng(self.randomness.entropy("inclusion", step, block)).random(size)
            chosen.append(start + np.flatnonzero(draws < self.sample_rate))
        return np.concatenate(chosen) if chosen else np.empty(0, dtype=np.int64)

    def rank_batch(self, step: int) -> list[tuple[int, int]]:
        return [(int(index), example_seed(self.randomness, step, int(index))) for index in self.indices(step)]

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        for step in range(self.start_step, self.total_steps):
            yield self.rank_batch(step)

    def __len__(self) -> int:
        return max(0, self.total_steps - self.start_step)


class IndexBatches:
    """The batches of `batches` (a `PoissonBatches`, e.g. a `DPStep`'s `.sampler`) as plain
    lists of indices, one per step from `start_step` (default: that sampler's) to its last:
    `DataLoader(dataset, batch_sampler=IndexBatches(dp_step.sampler, start_step=step))`
    takes step `step`'s Poisson batch first, so a resumed loop goes on with the steps it left.

    The indices are this rank's of each step, as `DPStep.batch(step)` gives them. A step's
    batch may be empty (probability (1 - q)^n): the loader's `collate_fn` then gets [], which
    torch's default collate refuses, so a loop where that can happen passes its own."""

    def __init__(self, batches: PoissonBatches, start_step: int | None = None):
        self.batches = batches
        self.start_step = batches.start_step if start_step is None else start_step
        if not 0 <= self.start_step <= batches.total_steps:
            raise DpvipInputError(f"start step {self.start_step} is outside the run's steps [0, {batches.total_steps}]")

    def __iter__(self) -> Iterator[list[int]]:
        for step in range(self.start_step, self.batches.total_steps):
            yield self.batches.indices(step).tolist()

    def __len__(self) -> int:
        return self.batches.total_steps - self.start_step
