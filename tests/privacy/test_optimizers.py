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


# Reference updates in plain tensor arithmetic (no torch.optim / timm code), written from
# each optimizer's definition with SETTINGS' lr, betas and eps (weight decay wd per test).
LR, (B1, B2), EPS = SETTINGS["lr"], SETTINGS["betas"], SETTINGS["eps"]
MOMENTUM = 0.9  # make_optimizer's default for SGD (DP-RandP's)


def _adam_direction(state, i, grad, t):
    """Bias-corrected Adam direction m_hat / (sqrt(v_hat) + eps), updating m and v."""
    state["m"][i] = B1 * state["m"][i] + (1 - B1) * grad
    state["v"][i] = B2 * state["v"][i] + (1 - B2) * grad * grad
    m_hat = state["m"][i] / (1 - B1**t)
    v_hat = state["v"][i] / (1 - B2**t)
    return m_hat / (v_hat.sqrt() + EPS)


def _sgd_step(params, grads, state, t, wd):
    # torch SGD: coupled weight decay, momentum buffer = g at the first step, no dampening.
    for i, (p, g) in enumerate(zip(params, grads)):
        g = g + wd * p
        state["buf"][i] = g if t == 1 else MOMENTUM * state["buf"][i] + g
        params[i] = p - LR * state["buf"][i]


def _adam_step(params, grads, state, t, wd):
    # Adam with coupled L2 weight decay: the decay term is added to the gradient.
    for i, (p, g) in enumerate(zip(params, grads)):
        params[i] = p - LR * _adam_direction(state, i, g + wd * p, t)


def _adamw_step(params, grads, state, t, wd):
    # AdamW: decoupled weight decay p <- p (1 - lr wd), then the Adam step on the raw gradient.
    for i, (p, g) in enumerate(zip(params, grads)):
        p = p * (1 - LR * wd)
        params[i] = p - LR * _adam_direction(state, i, g, t)


def _lamb_step(params, grads, state, t, wd):
    # LAMB as You et al. and optax define it: u = m_hat / (sqrt(v_hat) + eps) + wd p, then a
    # per-tensor trust ratio ||p|| / ||u|| (1 where either norm is 0), p <- p - lr r u.
    # timm's Lamb (always_adapt=True, max_grad_norm=None, bias_correction and grad_averaging
    # at their defaults) is this algorithm: eps outside the sqrt of the bias-corrected v (optax's
    # eps_root = 0), decay coupled into u before the ratio, the ratio from p before the step.
    # timm's foreach path folds the bias corrections into scalars (eps * sqrt(1 - b2^t)), an
    # algebraically identical rewrite.
    for i, (p, g) in enumerate(zip(params, grads)):
        u = _adam_direction(state, i, g, t) + wd * p
        p_norm, u_norm = p.norm(), u.norm()
        ratio = p_norm / u_norm if p_norm > 0 and u_norm > 0 else 1.0
        params[i] = p - LR * ratio * u


REFERENCE_STEPS = {"sgd": _sgd_step, "adam": _adam_step, "adamw": _adamw_step, "lamb": _lamb_step}


# Weight decay 0 too: timm's Lamb skips the trust ratio there unless always_adapt is set.
@pytest.mark.parametrize("weight_decay", [0.1, 0.0])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_steps_match_the_optimizers_update_rule_by_hand(name, weight_decay):
    model = toy(torch.float64)
    start = [p.detach().clone() for p in model.parameters()]
    optimizer = make_optimizer(name, model.parameters(), **{**SETTINGS, "weight_decay": weight_decay})
    expected = [p.clone() for p in start]
    state = {key: [torch.zeros_like(p) for p in start] for key in ("m", "v", "buf")}
    for step in range(3):  # several steps, so momentum and moment estimates matter
        grads = gradients(model, step)
        set_gradients(model.parameters(), grads)
        optimizer.step()
        REFERENCE_STEPS[name](expected, [g.to(torch.float64) for g in grads], state, step + 1, weight_decay)
    for mine, theirs, before in zip(model.parameters(), expected, start):
        assert not torch.allclose(mine, before)
        torch.testing.assert_close(mine.detach(), theirs, rtol=1e-6, atol=1e-7)
