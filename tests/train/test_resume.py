"""LoopState: a loop saved every k steps and on SIGTERM resumes to the uninterrupted result;
its check runs before the fingerprint is compared; `run` resumes (also from a step
interrupted inside, its DP charge given back); without a path nothing is kept."""

import os
import signal
from types import SimpleNamespace

import pytest
import torch

from dpvip.errors import DpvipInputError
from dpvip.train.resume import LoopState, StepInterrupted


def noisy_loop(path, steps=10, every=3, kill_at=None):
    """A loop whose result depends on its RNG stream and its state."""
    torch.manual_seed(0)
    total = torch.zeros(3)
    start = 0
    with LoopState(path, {"steps": steps}, every) as saved:
        state = saved.restore()
        if state:
            total, start = state["total"], state["step"]
        for step in range(start, steps):
            total = total + torch.randn(3)
            if kill_at == step + 1:
                os.kill(os.getpid(), signal.SIGTERM)
            saved.after_step(step + 1, lambda: {"total": total}, last=step + 1 == steps)
        saved.clear()
    return total


def test_a_loop_killed_by_sigterm_resumes_to_the_same_result(tmp_path):
    path = tmp_path / "loop.pt"
    whole = noisy_loop(None)
    with pytest.raises(SystemExit, match="stopped by SIGTERM after step 5"):
        noisy_loop(path, kill_at=5)
    assert torch.load(path, weights_only=True)["step"] == 5
    resumed = noisy_loop(path)
    assert torch.equal(resumed, whole)
    assert not path.exists()  # cleared once the result exists


def test_saves_every_k_steps_and_not_at_the_last(tmp_path):
    saved = LoopState(tmp_path / "s.pt", {}, every=4)
    with saved:
        for step in range(1, 11):
            saved.after_step(step, lambda: {}, last=step == 10)
    assert saved.saves == 2  # after 4 and 8


def test_a_state_of_other_settings_is_refused(tmp_path):
    path = tmp_path / "loop.pt"
    with pytest.raises(SystemExit):
        noisy_loop(path, kill_at=2)
    with pytest.raises(DpvipInputError, match="steps 10 \\(now 12\\)"):
        noisy_loop(path, steps=12)


def test_a_bad_interval_is_refused():
    with pytest.raises(DpvipInputError, match="checkpoint interval 0"):
        LoopState(None, {}, every=0)


def test_the_check_refuses_a_state_before_its_fingerprint_is_compared(tmp_path):
    path = tmp_path / "loop.pt"
    with pytest.raises(SystemExit):
        noisy_loop(path, kill_at=2)
    seen = []

    def refuse(state):
        seen.append(state["step"])
        raise DpvipInputError("trained with another mechanism")

    with pytest.raises(DpvipInputError, match="another mechanism"):  # not "steps 10 (now 12)"
        LoopState(path, {"steps": 12}).restore(check=refuse)
    assert seen == [2]
    with pytest.raises(DpvipInputError, match="steps 10 \\(now 12\\)"):  # a check that passes: the fingerprint's turn
        LoopState(path, {"steps": 12}).restore(check=seen.append)


def run_loop(path, steps=7, every=2, kill_at=None, interrupt_at=None, ledger=None):
    """`LoopState.run` over steps whose result depends on the RNG stream and the state;
    `interrupt_at`: SIGTERM answered inside that step (StepInterrupted), after it charged
    `ledger` (a DPStep's stand-in)."""
    torch.manual_seed(0)
    total = {"value": torch.zeros(2)}

    def step(t):
        if ledger is not None:
            ledger.ledger = ledger.ledger + 1  # a DP step charges first
        if interrupt_at == t:
            os.kill(os.getpid(), signal.SIGTERM)
            raise StepInterrupted
        total["value"] = total["value"] * 0.5 + torch.randn(2)
        if kill_at == t:
            os.kill(os.getpid(), signal.SIGTERM)

    with LoopState(path, {"steps": steps}, every) as saved:
        state = saved.restore()
        first = 0
        if state:
            total["value"], first = state["value"], state["step"]
        saved.run(first, steps, step, lambda: {"value": total["value"]}, dp_step=ledger)
        saved.clear()
    return total["value"]


def test_run_stops_on_sigterm_and_resumes_to_the_same_result(tmp_path):
    path = tmp_path / "run.pt"
    whole = run_loop(None)
    with pytest.raises(SystemExit, match=f"stopped by SIGTERM after step 4; state saved in {path}"):
        run_loop(path, kill_at=3)
    assert torch.load(path, weights_only=True)["step"] == 4
    assert torch.equal(run_loop(path), whole)
    assert not path.exists()


def test_a_step_interrupted_inside_gives_its_charge_back_and_resumes_there(tmp_path):
    path = tmp_path / "run.pt"
    whole = run_loop(None)
    ledger = SimpleNamespace(ledger=0)
    with pytest.raises(SystemExit, match="stopped by SIGTERM after step 5; state saved"):
        run_loop(path, interrupt_at=5, ledger=ledger)
    assert ledger.ledger == 5  # steps 0..4 charged; step 5's charge given back
    assert torch.load(path, weights_only=True)["step"] == 5  # as of the step before
    assert torch.equal(run_loop(path), whole)


def test_a_loop_state_without_a_path_keeps_nothing_but_stops_on_sigterm(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    saved = LoopState(None, {}, every=1)
    with saved:
        assert saved.restore() is None
        saved.after_step(1, lambda: {"never": "written"})
        saved.save(2, lambda: {"never": "written"})
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(SystemExit, match="stopped by SIGTERM after step 3 \\(no state kept\\)"):
            saved.after_step(3, lambda: {})
        saved.clear()
    assert saved.saves == 0 and not any(tmp_path.iterdir())
