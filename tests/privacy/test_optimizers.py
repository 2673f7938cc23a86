"""DP optimizers are "privatise, then any torch optimizer": make_optimizer builds the
optimizer, set_gradients writes the privatised gradient into .grad."""

import pytest
import torch
from timm.optim import Lamb
from torch import nn

from dpvip.errors import DpvipInputError
from dpvip.privacy import OPTIMIZERS as CONFIG_OPTIMIZERS
from dpvip.privacy.optimizers import OPTIMIZERS, make_optimizer, set_gradients

SETTINGS = {"lr": 0.05, "weight_decay": 0.1, "betas": (0.8, 0.95), "eps": 1e-6}

# Each name with the optimizer it must be, built directly with the same settings.
DIRECT = {
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1),
    "adam": lambda params: torch.optim.Adam(params, lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1),
    "sgd": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=0.1),
    "lamb": lambda params: Lamb(params, lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1, always_adapt=True, max_grad_norm=None),
}
TYPES = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD, "lamb": Lamb}


def toy(dtype=torch.float32) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 4), nn.LayerNorm(4), nn.Linear(4, 2)).to(dtype)


def gradients(model: nn.Module, step: int) -> list[torch.Tensor]:
    """Fake privatised gradients (fp32, as privatize returns them), different at every step."""
    generator = torch.Generator().manual_seed(step)
    return [torch.randn(p.shape, generator=generator) for p in model.parameters()]


def test_names_match_the_configs_names():
    assert OPTIMIZERS == CONFIG_OPTIMIZERS == tuple(TYPES)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_make_optimizer_builds_the_named_optimizer(name):
    optimizer = make_optimizer(name, toy().parameters(), **SETTINGS)
    assert type(optimizer) is TYPES[name]
    defaults = optimizer.defaults
    assert defaults["lr"] == 0.05 and defaults["weight_decay"] == 0.1
    if name == "sgd":
        assert defaults["momentum"] == 0.9  # DP-RandP's SGD with momentum
    else:
        assert tuple(defaults["betas"]) == (0.8, 0.95) and defaults["eps"] == 1e-6
    if name == "lamb":  # the trust ratio without weight decay too, no global clip (optax's LAMB)
        assert defaults["always_adapt"] and defaults["max_grad_norm"] is None


def test_unknown_optimizer_is_refused_by_name():
    with pytest.raises(DpvipInputError, match="'rmsprop'.*adamw"):
        make_optimizer("rmsprop", toy().parameters(), lr=0.1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_set_gradients_writes_grad_in_the_parameter_dtype(dtype):
    model = toy(dtype)
    grads = gradients(model, 0)
    set_gradients(model.parameters(), grads)
    for param, grad in zip(model.parameters(), grads):
        assert param.grad.dtype == dtype and param.grad.shape == param.shape
        torch.testing.assert_close(param.grad, grad.to(dtype), rtol=0, atol=0)


def test_set_gradients_needs_one_gradient_per_parameter():
    model = toy()
    with pytest.raises(ValueError):
        set_gradients(model.parameters(), gradients(model, 0)[:-1])


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_steps_equal_the_same_optimizer_fed_the_same_grad(name):
    ours, direct = toy(), toy()
    start = [p.detach().clone() for p in ours.parameters()]
    optimizer = make_optimizer(name, ours.parameters(), **SETTINGS)
    reference = DIRECT[name](list(direct.parameters()))
    for step in range(3):  # several steps, so momentum and moment estimates matter
        grads = gradients(ours, step)
        set_gradients(ours.parameters(), grads)
        optimizer.step()
        for param, grad in zip(direct.parameters(), grads):
            param.grad = grad.clone()
        reference.step()
    for mine, theirs, before in zip(ours.parameters(), direct.parameters(), start):
        assert not torch.allclose(mine, before)
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
