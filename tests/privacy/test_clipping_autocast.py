"""Per-example clipping under bf16 autocast (the GPU runs' forward pass), on CPU.

Autocast runs the forward pass and the backward pass to the layer outputs in bfloat16; the
clipping's products take the same bf16 operands (widened on CPU, on tensor cores on CUDA)
and accumulate in float32, and the clip factor bounds rounding (`dpvip.privacy.rounding`).
So (1) what each example adds is at most C whatever the forward's precision: the
sensitivity the accountant assumes; (2) the clipped sums are those of fp32 up to the
forward's bf16 rounding (stated below)."""

import pytest
import torch

from dpvip.models import MAESettings
from dpvip.models.mae import MaskedAutoencoder
from dpvip.privacy.clipping import ClippedGradientSum
from dpvip.synthetic.family import thread_invariant

BATCH = 8


@pytest.fixture(autouse=True)
def single_thread():
    with thread_invariant(torch.device("cpu")):
        yield


def bf16():
    return torch.autocast("cpu", dtype=torch.bfloat16)


def model_and_batch(batch=BATCH):
    torch.manual_seed(0)
    model = MaskedAutoencoder(MAESettings("micro", image_size=32, patch_size=4))
    images = torch.rand(batch, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    noise = model.mask_noise(batch, torch.Generator().manual_seed(2))
    return model, images, noise


def clipped(model, images, noise, clip_norm, autocast):
    summer = ClippedGradientSum(model, clip_norm)
    with autocast():
        _, norms = summer.add(lambda: model(images, noise).loss)
    summer.close()
    return summer.sums, norms


def flat_norm(tensors) -> float:
    return float(torch.sqrt(sum(t.double().square().sum() for t in tensors)))


def test_each_example_adds_at_most_c_under_bf16_autocast():
    model, images, noise = model_and_batch()
    clip_norm = 1e-3  # below every example's norm: every one is scaled to C
    for i in range(BATCH):
        sums, norms = clipped(model, images[i : i + 1], noise[i : i + 1], clip_norm, bf16)
        assert norms.item() > 10 * clip_norm
        # the bound covers the rounding: at most C (the float64 norm of float32 sums)
        assert flat_norm(sums) <= clip_norm, i


# bf16 keeps 8 bits of mantissa (relative rounding 2^-9 = 2e-3 per value); through the
# micro MAE's forward and backward passes the per-example norms moved by 1.3e-3 and the
# clipped sums by 1.1e-2 of each parameter's largest value (measured). Stated tolerances:
# norms 5e-3, sums 3e-2. A wrong clip (a factor, a missing example or layer) is of order 1.
def test_bf16_autocast_clipped_sums_match_fp32():
    model, images, noise = model_and_batch()
    exact_sums, exact_norms = clipped(model, images, noise, 1.0, lambda: torch.autocast("cpu", enabled=False))
    clip_norm = float(exact_norms.median())  # about half the examples clipped
    exact_sums, exact_norms = clipped(model, images, noise, clip_norm, lambda: torch.autocast("cpu", enabled=False))
    sums, norms = clipped(model, images, noise, clip_norm, bf16)
    assert norms.dtype == torch.float32 and all(s.dtype == torch.float32 for s in sums)
    torch.testing.assert_close(norms, exact_norms, rtol=5e-3, atol=0)
    for got, want in zip(sums, exact_sums):
        assert (got - want).abs().max() <= 3e-2 * want.abs().max() + 1e-9
    # ... and bf16 did change something: the forward ran in bf16 (not a silent fp32 run).
    assert not torch.equal(norms, exact_norms)
