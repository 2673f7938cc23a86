"""The one resume mechanism of the library: a job killed by a time limit, a preemption or a
crash continues where it stopped when rerun, and ends with the result an uninterrupted run
gives (bit for bit on CPU).

A `LoopState` is a state file that resumes a loop:

    with LoopState(work / "probe_blr0.1.pt", fingerprint, every=50) as saved:
        state = saved.restore()              # None on a first start
        if state: model.load_state_dict(state["model"]); start = state["step"]
        for step in range(start, steps):
            ...
            saved.after_step(step + 1, lambda: {"model": model.state_dict(), ...})

or, for a loop of `step(t)` calls, `saved.run(start, steps, step, snapshot)`.

`after_step` writes the state (atomically, with the RNG states of torch, numpy and Python)
every `every` steps and when SIGTERM arrives; after a SIGTERM it raises SystemExit, so the
job ends non-zero and the workflow reruns it. Under several processes the ranks agree on
the stop first and rank 0 writes. A state written with another fingerprint (settings,
data, key) is refused with the key that differs.

A `JobState` is an evaluation job's private work folder: it hands out a `LoopState` per
training loop and a `GridPoints` per grid search (whose finished points a rerun keeps).

Who uses them: MAE pre-training, DP-MAE and DP-RandP Phase I (`dpvip.train.run`, in
`work/state.pt`), DP-RandP Phases II and III (`dpvip.randp.private`), the evaluation jobs
(`dpvip.evaluate`: through a `JobState`, with the epoch helpers of
`dpvip.evaluate.resumable`; COCO and ADE20K through `dense_training.loop_state`), and the
transfer runs (`dpvip.transfer`: Mehta's heads and the private probe, through `run`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from dpvip.errors import DpvipInputError
from dpvip.files import write_json
from dpvip.plan.pretrain import first_difference
from dpvip.train import checkpoint
from dpvip.train.stop import StopRequest

DEFAULT_EVERY = 100  # steps between saves (each save costs one state write)
LOOP_PREFIX, GRID_PREFIX = "loop_", "grid_"  # the files a job's states are kept in


class StepInterrupted(Exception):
    """SIGTERM arrived inside a step (between two micro-batches): the step is abandoned
    before its noisy gradient exists, and the state saved as of the step before."""


def refuse_other_run(path: Path, stored: dict, current: dict) -> None:
    """A state is resumed only by the run it belongs to; the refusal names what differs."""
    difference = first_difference(stored, current)
    if difference:
        raise DpvipInputError(f"{path} belongs to a run with {difference}; delete it to start this job over")


class LoopState:
    """The state file `path` of one loop of the run `fingerprint`, saved every `every` steps;
    `total`, the loop's length where the caller knows it, is named in what it prints.

    Without a path nothing is kept (nothing restored, nothing saved), but SIGTERM means the
    same as with one: while the LoopState is entered, the loop stops after the step with
    SystemExit, so the job ends non-zero whether or not it keeps a state. Outside a `with`
    no handler is installed and SIGTERM keeps its default meaning (the process ends)."""

    def __init__(
        self,
        path: str | Path | None,
        fingerprint: dict,
        every: int = DEFAULT_EVERY,
        dist=None,
        total: int | None = None,
    ):
        if not (isinstance(every, int) and every >= 1):
            raise DpvipInputError(f"checkpoint interval {every!r} must be a positive integer")
        self.path = Path(path) if path is not None else None
        self.fingerprint, self.every, self.dist, self.total = fingerprint, every, dist, total
        self._stop = StopRequest()
        self.saves = 0

    @classmethod
    def of(cls, state: LoopState | None) -> LoopState:
        """`state`, or for a loop given none one that keeps nothing (see above for SIGTERM)."""
        return state if state is not None else cls(None, {})

    def __enter__(self) -> LoopState:
        self._stop.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.__exit__(*exc)

    @property
    def _is_main(self) -> bool:
        return self.dist is None or self.dist.is_main

    def restore(self, device=None, check: Callable[[dict], None] | None = None) -> dict | None:
        """The saved state (RNG states already restored), or None when there is none.
        `check(state)` runs before the fingerprint is compared: a caller may refuse the state
        with a sharper reason (a DP ledger of another mechanism names the mechanism)."""
        if self.path is None or not self.path.is_file():
            return None
        state = checkpoint.load(self.path, device)
        if check is not None:
            check(state)
        refuse_other_run(self.path, state.get("fingerprint", {}), self.fingerprint)
        checkpoint.restore_rng_states(state["rng"])
        if self._is_main:
            of = f" of {self.total}" if self.total is not None else ""
            print(f"resuming from {self.path} at step {state['step']}{of}", flush=True)
        return state

    def stop_requested(self) -> bool:
        """Whether SIGTERM has arrived (on this process): a loop whose steps outlast the
        scheduler's grace can stop inside a step."""
        return bool(self._stop.requested)

    def _stopping(self) -> bool:
        # Ranks may see the signal at different steps; they agree to stop together.
        requested = float(self.stop_requested())
        return (self.dist.sum(requested) if self.dist is not None else requested) > 0

    def save(self, step: int, snapshot: Callable[[], dict]) -> None:
        """Write the state after `step` steps now: `snapshot()` and the RNG states (rank 0
        writes, the others wait for it)."""
        if self.path is None:
            return
        if self._is_main:
            record = {"fingerprint": self.fingerprint, "step": step, "rng": checkpoint.rng_states(), **snapshot()}
            checkpoint.save_atomic(record, self.path)
            self.saves += 1
        if self.dist is not None:
            self.dist.barrier()

    def after_step(self, step: int, snapshot: Callable[[], dict], last: bool = False) -> None:
        """Save after `step` steps when it is due (every `every`, not at the last step: the
        job's result follows) or when SIGTERM asked; after a SIGTERM, stop."""
        stopping = self._stopping()
        if stopping or (step % self.every == 0 and not last):
            self.save(step, snapshot)
        if stopping:
            # the messages the loops always gave: "at step 5 of 8" where the length is known
            at = f"at step {step} of {self.total}" if self.total is not None else f"after step {step}"
            kept = f"; state saved in {self.path}" if self.path is not None else " (no state kept)"
            raise SystemExit(f"stopped by SIGTERM {at}{kept}")

    def run(
        self,
        first: int,
        steps: int,
        step: Callable[[int], None],
        snapshot: Callable[[], dict],
        dp_step=None,
        desc: str = "steps",
        progress: bool = False,
    ) -> None:
        """Run `step(t)` for t = first .. steps - 1, `after_step` after each.

        A step longer than the grace a scheduler leaves between SIGTERM and SIGKILL (one of
        the ImageNet blocks4 probe is a pass over 94 GB of features) answers SIGTERM between
        two micro-batches by raising `StepInterrupted`: the state is saved as of the step
        before and the job stops. That step was charged to the ledger of `dp_step` (the
        run's `dpvip.privacy.step.DPStep`: a DP step charges first) but released nothing, so
        the ledger is given back; the resumed run redoes the step with the same batch and
        noise (both derived from the run's key and the step number), released once."""
        bar = tqdm(
            total=steps, initial=first, desc=desc, unit="step", disable=not progress, leave=False, mininterval=10
        )
        with bar:
            for t in range(first, steps):
                ledger = dp_step.ledger if dp_step is not None else None
                try:
                    step(t)
                except StepInterrupted:
                    if dp_step is not None:
                        dp_step.ledger = ledger
                    self.after_step(t, snapshot)  # SIGTERM: saves the state after t steps and stops
                    raise SystemExit(f"stopped by SIGTERM in step {t + 1}") from None
                bar.update()
                self.after_step(t + 1, snapshot, last=t + 1 == steps)

    def clear(self) -> None:
        """Forget the state once the job's result is written (a rerun then starts over)."""
        if self.path is not None and self._is_main:
            self.path.unlink(missing_ok=True)


def plain(value: dict) -> dict:
    """`value` as JSON gives it back (tuples as lists): a fingerprint compares equal after a
    round trip through a state file."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


@dataclass(frozen=True)
class JobState:
    """Where an evaluation job keeps what a rerun resumes from (its private work folder,
    `dpvip.files.private_work_dir`), what its loops belong to (the model and data: a state
    of another checkpoint is refused, not resumed), how often they save and over which
    processes."""

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

    def loop(self, name: str, fingerprint: dict) -> LoopState:
        """The saved state of the job's loop `name` (settings etc. in `fingerprint`); without
        a folder, one that keeps nothing."""
        path = self.folder / f"{LOOP_PREFIX}{name}.pt" if self.folder is not None else None
        return LoopState(path, plain({"job": self.identity} | fingerprint), self.every, self.dist)

    def clear_loop(self, name: str) -> None:
        """Forget loop `name`'s state once the result it leads to exists."""
        self.loop(name, {}).clear()

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
            refuse_other_run(path, stored.get("fingerprint", {}), fingerprint)
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
