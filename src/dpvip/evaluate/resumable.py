"""Epoch loops of the evaluation jobs, resumable mid-epoch on the library's one resume
mechanism (`dpvip.train.resume`: a job's `JobState` hands each loop a `LoopState`, saved
every k steps and on SIGTERM; a rerun ends with the result an uninterrupted run gives, bit
for bit on CPU).

An epoch loop over shuffled batches (`ShuffledEpochs`) resumes mid-epoch: a state holds the
order generator as it was before the epoch's order was drawn, so the rerun draws the same
order and skips the batches already done. Everything else random (augmentation, dropout)
draws from the global generators, whose states `LoopState` saves and restores.
`restore_training` and `training_state` are what such a loop's state holds: the model, the
optimizer and the order.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from dpvip.train.resume import LoopState


class ShuffledEpochs:
    """The steps of `epochs` passes over `examples` in batches of `batch`, each epoch in an
    order drawn from `generator` at its start (`drop_last`: full batches only): (step,
    indices) pairs, from the step a restored state names."""

    def __init__(self, examples: int, batch: int, epochs: int, generator: torch.Generator, drop_last: bool):
        self.examples, self.batch, self.epochs, self.generator = examples, batch, epochs, generator
        self.per_epoch = examples // batch if drop_last else -(-examples // batch)
        self.total = epochs * self.per_epoch
        self.start = 0
        self._before_order = generator.get_state()

    def state(self, done: int) -> dict:
        """What resumes after `done` steps: the generator before the order of the epoch the
        next step falls in was drawn (at an epoch's end: as it is now)."""
        at_epoch_end = done % self.per_epoch == 0
        return {"order_generator": self.generator.get_state() if at_epoch_end else self._before_order}

    def restore(self, state: dict) -> None:
        self.generator.set_state(state["order_generator"])
        self.start = state["step"]

    def __iter__(self) -> Iterator[tuple[int, torch.Tensor]]:
        first, skip = divmod(self.start, self.per_epoch)
        for epoch in range(first, self.epochs):
            self._before_order = self.generator.get_state()
            order = torch.randperm(self.examples, generator=self.generator)
            for position in range(skip if epoch == first else 0, self.per_epoch):
                yield epoch * self.per_epoch + position, order[position * self.batch : (position + 1) * self.batch]


def restore_training(saved: LoopState, model: torch.nn.Module, optimizer, steps: ShuffledEpochs) -> None:
    """Load a saved state of an epoch loop, if there is one, into its model, optimizer and steps."""
    state = saved.restore()
    if state:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        steps.restore(state)


def training_state(model: torch.nn.Module, optimizer, steps: ShuffledEpochs, done: int) -> dict:
    """What `restore_training` resumes after `done` steps."""
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), **steps.state(done)}
