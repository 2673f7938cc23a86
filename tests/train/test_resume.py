"""LoopState: a loop saved every k steps and on SIGTERM resumes to the uninterrupted result."""

import os
import signal

import pytest
import torch

from dpvip.errors import DpvipInputError
from dpvip.train.resume import LoopState


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
