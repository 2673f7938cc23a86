"""The GroupNorm wide ResNets and projection head of DP-RandP."""

import pytest
import torch
from torch import nn

from dpvip.errors import DpvipInputError
from dpvip.models import WRN_SIZES, wrn_size
from dpvip.models.wrn import ProjectionHead, WideResNet

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.fixture(scope="module")
def wrn16_4():
    torch.manual_seed(0)
    return WideResNet("wrn16_4", num_classes=10)


def test_registry_holds_the_papers_sizes():
    assert (WRN_SIZES["wrn16_4"].depth, WRN_SIZES["wrn16_4"].widen) == (16, 4)
    assert (WRN_SIZES["wrn40_4"].depth, WRN_SIZES["wrn40_4"].widen) == (40, 4)
    assert WRN_SIZES["wrn16_4"].widths == (16, 64, 128, 256)
    with pytest.raises(DpvipInputError, match="not registered"):
        wrn_size("wrn28_10")


def test_wrn16_4_has_about_2_7_million_parameters(wrn16_4):
    assert 2.6e6 < count(wrn16_4) < 2.8e6


def test_wrn40_4_has_about_8_9_million_parameters():
    assert 8.8e6 < count(WideResNet("wrn40_4")) < 9.0e6


def test_shapes_at_32_pixels(wrn16_4):
    x = torch.randn(2, 3, 32, 32)
    # The last stage has 256 channels at 8 x 8: the 16384 inputs of the projection head.
    assert wrn16_4.features(x).shape == (2, 16384)
    assert wrn16_4(x).shape == (2, 10)


def test_other_image_sizes_work(wrn16_4):
    x = torch.randn(2, 3, 64, 64)
    assert wrn16_4.features(x).shape == (2, 256 * 16 * 16)
    assert wrn16_4(x).shape == (2, 10)


def test_no_batchnorm_anywhere(wrn16_4):
    head = ProjectionHead(in_features=64, hidden=32, out_features=8)
    for module in [*wrn16_4.modules(), *head.modules()]:
        assert not isinstance(module, nn.modules.batchnorm._BatchNorm)
    norms = [m for m in wrn16_4.modules() if isinstance(m, nn.GroupNorm)]
    assert norms and all(m.num_groups == 16 for m in norms)


def test_examples_do_not_mix(wrn16_4):
    """No batch statistics: an example's output does not depend on its batch mates."""
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(wrn16_4(x)[:1], wrn16_4(x[:1]), atol=1e-5)


def test_projection_head_default_sizes_are_the_papers():
    with torch.device("meta"):
        head = ProjectionHead()
    linears = [m for m in head.modules() if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(16384, 4096), (4096, 4096), (4096, 128)]


def test_projection_head_output_is_l2_normalised():
    torch.manual_seed(0)
    head = ProjectionHead(in_features=64, hidden=32, out_features=8)
    z = head(torch.randn(5, 64) * 10)
    assert z.shape == (5, 8)
    assert torch.allclose(z.norm(dim=1), torch.ones(5), atol=1e-6)
