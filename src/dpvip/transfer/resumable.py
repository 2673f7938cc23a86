"""Resumable step loops of the DP transfer runs (Mehta et al.'s heads, DP-RandP's private
probe), on `dpvip.train.resume.LoopState`: the run's state is saved every k steps and on
SIGTERM in the job's private work folder, and a rerun continues from it to the result an
uninterrupted run gives (bit for bit on CPU).

One step of the ImageNet blocks4 probe is a pass over 94 GB of features, longer than the
grace a scheduler leaves between SIGTERM and SIGKILL, so SIGTERM is also answered between
two micro-batches: the step is abandoned and the state saved as of the step before. That
step was charged to the ledger (a DP step charges first) but released nothing: its noisy
gradient did not exist yet. The ledger is therefore restored to the count before the step,
and the resumed run redoes the step with the same Poisson batch and the same noise (both
derived from the run's key and the step number), so the output is released once.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from tqdm import tqdm

from dpvip.privacy.step import DPStep
from dpvip.train.resume import LoopState
from dpvip.transfer.rows import StepInterrupted

__all__ = ["StepInterrupted", "run_steps"]


def run_steps(
    first: int,
    steps: int,
    step: Callable[[int], None],
    state: LoopState | None,
    snapshot: Callable[[], dict],
    dp_step=None,
    desc: str = "steps",
    progress: bool = False,
) -> None:
    """Run `step(t)` for t = first .. steps - 1; after each, `state` saves `snapshot()` when
    due (every k steps, or on SIGTERM, then the job stops). `dp_step`: the run's DPStep,
    whose ledger an abandoned step gives back (see the module's note)."""
    bar = tqdm(total=steps, initial=first, desc=desc, unit="step", disable=not progress, leave=False, mininterval=10)
    with bar:
        for t in range(first, steps):
            ledger = dp_step.ledger if dp_step is not None else None
            try:
                step(t)
            except StepInterrupted:
                if dp_step is not None:
                    dp_step.ledger = ledger
                if state is not None:
                    state.after_step(t, snapshot)  # SIGTERM: saves the state after t steps and stops
                raise SystemExit(f"stopped by SIGTERM in step {t + 1}") from None
            bar.update()
            if state is not None:
                state.after_step(t + 1, snapshot, last=t + 1 == steps)


def optimizer_state(dp_step: DPStep | None, optimizer: torch.optim.Optimizer) -> dict:
    """What a snapshot keeps of the optimizer, and of a DP run its ledger (`DPStep.state_dict`)."""
    return dp_step.state_dict() if dp_step else {"optimizer": optimizer.state_dict(), "privacy": None}


def restore_optimizer_state(
    dp_step: DPStep | None, optimizer: torch.optim.Optimizer, restored: dict, state: LoopState
) -> None:
    """Back from `optimizer_state`'s record; a DP run's ledger is checked against its own."""
    if dp_step:
        dp_step.load_state_dict(restored, restored["step"], str(state.path))
    else:
        optimizer.load_state_dict(restored["optimizer"])
