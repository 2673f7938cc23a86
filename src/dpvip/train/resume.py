"""Resumable loops for evaluation and transfer jobs: a job killed by a time limit, a
preemption or a crash continues where it stopped when rerun, and ends with the result an
uninterrupted run gives (bit for bit on CPU).

A `LoopState` keeps one loop's state in a file of the job's private work folder:

    with LoopState(work / "probe_blr0.1.pt", fingerprint, every=50) as saved:
        state = saved.restore()              # None on a first start
        if state: model.load_state_dict(state["model"]); start = state["step"]
        for step in range(start, steps):
            ...
            saved.after_step(step + 1, lambda: {"model": model.state_dict(), ...})

`after_step` writes the state (atomically, with the RNG states of torch, numpy and Python)
every `every` steps and when SIGTERM arrives; after a SIGTERM it raises SystemExit, so the
job ends non-zero and the workflow reruns it. Under several processes the ranks agree on
the stop first and rank 0 writes. A state written with another fingerprint (settings,
data) is refused with the key that differs. Without a path nothing is saved.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dpvip.errors import DpvipInputError
from dpvip.plan.pretrain import first_difference
from dpvip.train import checkpoint
from dpvip.train.stop import StopRequest

DEFAULT_EVERY = 100  # steps between saves (each save costs one state write)


class LoopState:
    def __init__(self, path: str | Path | None, fingerprint: dict, every: int = DEFAULT_EVERY, dist=None):
        if not (isinstance(every, int) and every >= 1):
            raise DpvipInputError(f"checkpoint interval {every!r} must be a positive integer")
        self.path = Path(path) if path is not None else None
        self.fingerprint, self.every, self.dist = fingerprint, every, dist
        self._stop = StopRequest()
        self.saves = 0

    def __enter__(self) -> LoopState:
        self._stop.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.__exit__(*exc)

    @property
    def _is_main(self) -> bool:
        return self.dist is None or self.dist.is_main

    def restore(self, device=None) -> dict | None:
        """The saved state (RNG states already restored), or None when there is none."""
        if self.path is None or not self.path.is_file():
            return None
        state = checkpoint.load(self.path, device)
        difference = first_difference(state.get("fingerprint", {}), self.fingerprint)
        if difference:
            raise DpvipInputError(f"{self.path} belongs to a run with {difference}; delete it to start this job over")
        checkpoint.restore_rng_states(state["rng"])
        print(f"resuming from {self.path} at step {state['step']}", flush=True)
        return state

    def stop_requested(self) -> bool:
        """Whether SIGTERM has arrived (on this process): a loop whose steps outlast the
        scheduler's grace can stop inside a step."""
        return bool(self._stop.requested)

    def _stopping(self) -> bool:
        requested = float(self.stop_requested())
        return (self.dist.sum(requested) if self.dist is not None else requested) > 0

    def after_step(self, step: int, state: Callable[[], dict], last: bool = False) -> None:
        """Save after `step` steps when it is due (every `every`, not at the last step: the
        job's result follows) or when SIGTERM asked; after a SIGTERM, stop."""
        stopping = self._stopping()
        if self.path is None:
            if stopping:  # nowhere to save: stop all the same
                raise SystemExit(f"stopped by SIGTERM after step {step} (no state kept)")
            return
        if not (stopping or (step % self.every == 0 and not last)):
            return
        if self._is_main:
            record = {"fingerprint": self.fingerprint, "step": step, "rng": checkpoint.rng_states(), **state()}
            checkpoint.save_atomic(record, self.path)
            self.saves += 1
        if self.dist is not None:
            self.dist.barrier()
        if stopping:
            raise SystemExit(f"stopped by SIGTERM after step {step}; state saved in {self.path}")

    def clear(self) -> None:
        """Forget the state once the job's result is written (a rerun then starts over)."""
        if self.path is not None and self._is_main:
            self.path.unlink(missing_ok=True)
