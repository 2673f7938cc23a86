"""The weight EMA of DP-RandP (decay 0.9999, warm-up min(decay, (1 + t) / (10 + t)))."""

import pytest
import torch
from torch import nn

from dpvip.randp.ema import EMA, ema_decay

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def test_warmup_formula_at_steps_0_1_100():
    assert ema_decay(0) == pytest.approx(1 / 10)
    assert ema_decay(1) == pytest.approx(2 / 11)
    assert ema_decay(100) == pytest.approx(101 / 110)
    assert ema_decay(10**6) == 0.9999  # capped by the decay
    assert ema_decay(0, warmup=False) == 0.9999


def small_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.GroupNorm(2, 4), nn.Linear(4, 2))


def perturb(model: nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=generator))


def test_matches_a_hand_rolled_average():
    model = small_model()
    ema = EMA(model, decay=0.99)
    reference = [p.detach().clone() for p in model.parameters()]
    for step in range(30):
        perturb(model, step)
        used = ema.update(step)
        decay = min(0.99, (1 + step) / (10 + step))
        assert used == pytest.approx(decay)
        reference = [decay * r + (1 - decay) * p.detach() for r, p in zip(reference, model.parameters())]
    for average, want in zip(ema.averaged.parameters(), reference):
        assert torch.allclose(average, want, atol=1e-6)


def test_averaged_copy_is_separate_and_frozen():
    model = small_model()
    ema = EMA(model)
    perturb(model, 0)
    assert not torch.equal(ema.averaged[0].weight, model[0].weight)  # a copy, not the model
    assert not any(p.requires_grad for p in ema.averaged.parameters())
    assert not ema.averaged.training


def test_step_defaults_to_the_update_count():
    ema = EMA(small_model())
    assert [ema.update() for _ in range(3)] == pytest.approx([1 / 10, 2 / 11, 3 / 12])


def test_resume_from_state_dict_continues_identically():
    model = small_model()
    ema = EMA(model, decay=0.9)
    for step in range(5):
        perturb(model, step)
        ema.update()
    state = ema.state_dict()
    resumed = EMA(model, decay=0.5, warmup=False)  # settings come from the state
    resumed.load_state_dict(state)
    for step in range(5, 8):
        perturb(model, step)
        ema.update()
        resumed.update()
    assert resumed.updates == ema.updates == 8
    for a, b in zip(ema.averaged.parameters(), resumed.averaged.parameters()):
        assert torch.equal(a, b)
