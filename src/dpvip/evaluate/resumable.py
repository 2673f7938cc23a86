"""Resumable evaluation jobs: a job killed by a time limit, a preemption or a crash continues
where it stopped when rerun, and ends with the result an uninterrupted run gives (bit for bit
on CPU).

A `JobState` says where a job keeps what a rerun resumes from (its private work folder,
`dpvip.files.private_work_dir`), what its loops belong to (the model and data: a state of
another checkpoint is refused, not resumed), how often they save and over which processes.
From it, each training loop gets a `LoopState` (`dpvip.train.resume`: saved every k steps
and on SIGTERM) and each grid search its finished points (`GridPoints`: a rerun keeps their
results and trains only the rest).

Epoch loops over shuffled batches (`ShuffledEpochs`) resume mid-epoch: a state holds the
order generator as it was before the epoch's order was drawn, so the rerun draws the same
order and skips the batches already done. Everything else random (augmentation, dropout)
draws from the global generators, whose states `LoopState` saves and restores.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from dpvip.errors import DpvipInputError
from dpvip.files import write_json
from dpvip.plan.pretrain import first_difference
from dpvip.train.resume import DEFAULT_EVERY, LoopState

LOOP_PREFIX, GRID_PREFIX = "loop_", "grid_"  # the files a job's states are kept in


def plain(value: dict) -> dict:
    """`value` as JSON gives it back (tuples as lists): a fingerprint compares equal after a
    round trip through a state file."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


class NoState:
    """A loop that keeps nothing (no work folder): nothing restored, nothing saved, and
    SIGTERM keeps its default meaning (the process ends)."""

    path = None

    def __enter__(self) -> NoState:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def restore(self, device=None) -> None:
        return None

    def after_step(self, step: int, state, last: bool = False) -> None:
        return None

    def clear(self) -> None:
        return None


@dataclass(frozen=True)
class JobState:
    folder: Path | None = None  # the job's private work folder; None: nothing is kept
    identity: dict = field(default_factory=dict)  # what every loop depends on beside its settings
    every: int = DEFAULT_EVERY  # steps between saves
    dist: object | None = None  # dpvip.train.distributed.Distributed: rank 0 writes

    @classmethod
    def of(cls, work: JobState | str | Path | None) -> JobState:
        """A JobState, or one for a bare work folder (or none)."""
        if isinstance(work, JobState):
            return work
        return cls(Path(work) if work is not None else None)

    @property
    def is_main(self) -> bool:
        return self.dist is None or self.dist.is_main

    def loop(self, name: str, fingerprint: dict) -> LoopState | NoState:
        """The saved state of the job's loop `name` (settings etc. in `fingerprint`)."""
        if self.folder is None:
            return NoState()
        return LoopState(self._loop_path(name), plain({"job": self.identity} | fingerprint), self.every, self.dist)

    def _loop_path(self, name: str) -> Path:
        return self.folder / f"{LOOP_PREFIX}{name}.pt"

    def clear_loop(self, name: str) -> None:
        """Forget loop `name`'s state once the result it leads to exists."""
        if self.folder is not None and self.is_main:
            self._loop_path(name).unlink(missing_ok=True)

    def grid(self, name: str, fingerprint: dict) -> GridPoints | None:
        """The finished points of the job's grid search over `name`."""
        if self.folder is None:
            return None
        path = self.folder / f"{GRID_PREFIX}{name}.json"
        return GridPoints(path, plain({"job": self.identity} | fingerprint), self.is_main)


class GridPoints:
    """The results of a grid search's finished points, in a JSON file of the job's work
    folder (values and results as JSON keeps floats: exactly)."""

    def __init__(self, path: Path, fingerprint: dict, writer: bool = True):
        self.path, self.fingerprint, self.writer = path, fingerprint, writer
        self.points: list[list] = []
        if path.is_file():
            stored = json.loads(path.read_text())
            difference = first_difference(stored.get("fingerprint", {}), fingerprint)
            if difference:
                raise DpvipInputError(f"{path} belongs to a run with {difference}; delete it to start this job over")
            self.points = stored["points"]
            print(f"{path}: {len(self.points)} grid points already done", flush=True)

    def result(self, value):
        """The stored result of grid point `value`, or None."""
        return next((result for done, result in self.points if done == value), None)

    def add(self, value, result) -> None:
        self.points.append([value, result])
        if self.writer:
            write_json({"fingerprint": self.fingerprint, "points": self.points}, self.path)

    def clear(self) -> None:
        if self.writer:
            self.path.unlink(missing_ok=True)


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


def restore_training(saved: LoopState | NoState, model: torch.nn.Module, optimizer, steps: ShuffledEpochs) -> None:
    """Load a saved state of an epoch loop, if there is one, into its model, optimizer and steps."""
    state = saved.restore()
    if state:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        steps.restore(state)


def training_state(model: torch.nn.Module, optimizer, steps: ShuffledEpochs, done: int) -> dict:
    """What `restore_training` resumes after `done` steps."""
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), **steps.state(done)}
