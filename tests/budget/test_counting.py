"""FLOP counts against their analytic values: layers, the formulas added to torch's table, and
a small MAE encoder counted on the meta device."""

from __future__ import annotations

import torch
from torch import nn

from dpvip.budget import networks
from dpvip.budget.counting import META, count_flops, forward_flops, images_on, training_flops
from dpvip.models import MAE_SIZES, MAESettings


def test_linear_training_step_is_six_flops_per_weight_and_example():
    batch, fan_in, fan_out = 5, 12, 7
    with torch.device(META):
        layer = nn.Linear(fan_in, fan_out)
    inputs = torch.empty(batch, fan_in, device=META, requires_grad=True)  # inside a network
    # forward 2 B in out, then the input's and the weight's gradients 2 B in out each
    assert training_flops(lambda: layer(inputs)) == 6 * batch * fan_in * fan_out
    # a first layer (its input needs no gradient): forward and the weight's gradient
    assert training_flops(lambda: layer(inputs.detach())) == 4 * batch * fan_in * fan_out


def test_convolution_forward_is_two_flops_per_multiply_add():
    with torch.device(META):
        conv = nn.Conv2d(3, 8, 3, padding=1)
    assert forward_flops(conv, images_on(META, 2, 16)) == 2 * 2 * (16 * 16) * 8 * (3 * 3 * 3)


def test_in_place_products_of_the_clipping_are_counted():
    assert count_flops(lambda: torch.zeros(4, 5).addmm_(torch.zeros(4, 3), torch.zeros(3, 5))) == 2 * 4 * 3 * 5
    assert count_flops(lambda: torch.zeros(4).addmv_(torch.zeros(4, 3), torch.zeros(3))) == 2 * 4 * 3


def test_cpu_fused_attention_is_counted_as_on_the_meta_device():
    def attention(device):
        q = torch.zeros(1, 2, 9, 8, device=device)
        return count_flops(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q))

    assert attention(torch.device("cpu")) == attention(META) == 2 * (2 * 2 * 9 * 9 * 8)


def _encoder_forward(size: str, image_size: int, patch: int) -> int:
    """The unmasked MAE encoder's products: patch projection, class token, per block qkv,
    attention scores and mixing, output projection and the MLP."""
    shape = MAE_SIZES[size]
    patches, width = (image_size // patch) ** 2, shape.encoder_width
    tokens, hidden = patches + 1, int(width * shape.mlp_ratio)
    block = (
        2 * tokens * width * 3 * width
        + 2 * 2 * tokens * tokens * width
        + 2 * tokens * width * width
        + 2 * 2 * tokens * width * hidden
    )
    return 2 * patches * width * 3 * patch * patch + 2 * width + shape.encoder_depth * block


def test_mae_encoder_features_equal_the_analytic_count():
    counted = networks.mae_features(MAESettings("pico", image_size=32, patch_size=4), "prelogits")
    assert counted.forward == _encoder_forward("pico", 32, 4) == 15_336_064
    assert counted.width == MAE_SIZES["pico"].encoder_width
