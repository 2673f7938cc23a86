"""ClippedGradientSum on GroupNorm models (DP-RandP's WRN-16-4 and projection head use
GroupNorm(16) instead of BatchNorm), against a one-example-at-a-time loop."""

import pytest
import torch
from torch import nn

from dpvip.models import WRNSize
from dpvip.models.wrn import ProjectionHead, WideResNet
from dpvip.privacy.clipping import CLIP_EPSILON, ClippedGradientSum

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def per_example_reference(model: nn.Module, loss_of, count: int, clip_norm: float):
    """Each example alone (`loss_of(rows)`: the losses of those rows of the batch): its full
    gradient, flat norm, opacus' factor; (float64 sums, norms)."""
    params = [p for p in model.parameters() if p.requires_grad]
    sums = [torch.zeros_like(p, dtype=torch.float64) for p in params]
    norms = []
    for i in range(count):
        grads = torch.autograd.grad(loss_of(slice(i, i + 1)).sum(), params)
        norm = torch.linalg.vector_norm(torch.cat([g.double().flatten() for g in grads]))
        factor = min(1.0, clip_norm / (norm.item() + CLIP_EPSILON))
        for total, grad in zip(sums, grads):
            total.add_(grad.double(), alpha=factor)
        norms.append(norm)
    return sums, torch.stack(norms)


def check_against_reference(model, loss_of, count, sums_rtol=1e-5):
    _, norms = per_example_reference(model, loss_of, count, 1.0)
    clip_norm = float(norms.median())  # some examples clipped, some not
    want, norms = per_example_reference(model, loss_of, count, clip_norm)
    assert (norms > clip_norm * 1.001).any() and (norms < clip_norm).any()
    summer = ClippedGradientSum(model, clip_norm)
    _, got_norms = summer.add(lambda: loss_of(slice(None)))
    summer.close()
    torch.testing.assert_close(got_norms.double(), norms, rtol=1e-6, atol=0)
    for got, ref in zip(summer.sums, want):
        # sums are kept in fp32; the model runs in float64
        assert (got.double() - ref).abs().max() <= sums_rtol * ref.abs().max() + 1e-12
    assert all(p.grad is None for p in model.parameters())


class ConvGroupNormLinear(nn.Module):
    """Conv2d -> GroupNorm(2 groups of 3) -> ReLU -> mean over pixels -> Linear: a squared
    error per example, with non-trivial GroupNorm affine parameters."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 6, 3, padding=1)
        self.norm = nn.GroupNorm(2, 6)
        self.linear = nn.Linear(6, 1)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        h = torch.relu(self.norm(self.conv(x))).mean((2, 3))
        return (self.linear(h).squeeze(-1) - 1).pow(2)


def test_conv_groupnorm_linear_equals_per_example_loop():
    torch.manual_seed(0)
    model = ConvGroupNormLinear().double()
    x = torch.randn(6, 2, 5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    check_against_reference(model, lambda rows: model(x[rows]), len(x))


def test_groupnorm_on_flat_features_equals_per_example_loop():
    """The projection head normalises (batch, features) tensors, without spatial dims."""
    torch.manual_seed(0)
    head = ProjectionHead(in_features=12, hidden=32, out_features=4).double()
    target = torch.nn.functional.normalize(torch.ones(4, dtype=torch.float64), dim=0)
    x = torch.randn(6, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    check_against_reference(head, lambda rows: (head(x[rows]) - target).pow(2).sum(1), len(x))


def test_small_wide_resnet_equals_per_example_loop():
    """A depth-10, widen-1 WRN: pre-activation blocks, projected shortcuts, GroupNorm(16)."""
    torch.manual_seed(0)
    model = WideResNet(WRNSize(10, 1), num_classes=3).double()
    x = torch.randn(4, 3, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    labels = torch.tensor([0, 1, 2, 1])
    check_against_reference(
        model, lambda rows: nn.functional.cross_entropy(model(x[rows]), labels[rows], reduction="none"), len(x)
    )


def test_small_wide_resnet_on_the_bounded_path_equals_per_example_loop(monkeypatch):
    # Reduced precision forced with IEEE products: the GroupNorms' and biases' per-example
    # gradients go into one buffer, the convolutions' formed weights stay with their layers
    # (`FormedParts`). The clip factors are the bound's, below opacus' by its slack (measured:
    # the sums within 3.2e-4 of each parameter's largest value); a misplaced part is of order 1.
    from dpvip.privacy import clipping

    monkeypatch.setattr(clipping, "reduced_precision", lambda dtype, device: True)
    parts = []

    class Spy(clipping.FormedParts):
        def __init__(self, small, places, large):
            super().__init__(small, places, large)
            parts.append((len(small), len(large)))

    monkeypatch.setattr(clipping, "FormedParts", Spy)
    torch.manual_seed(0)
    model = WideResNet(WRNSize(10, 2), num_classes=3).double()  # widen 2: convolutions over 4,096 weights
    x = torch.randn(4, 3, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    labels = torch.tensor([0, 1, 2, 1])
    check_against_reference(
        model,
        lambda rows: nn.functional.cross_entropy(model(x[rows]), labels[rows], reduction="none"),
        len(x),
        sums_rtol=1e-3,
    )
    assert len(parts) == 1 and parts[0][0] > 0 and parts[0][1] > 0


@pytest.mark.parametrize("views", [1, 3])
def test_convolutions_as_unfolded_linear_layers_equal_opacus_grad_sampler(views, monkeypatch):
    """Conv2d goes through the Linear path on unfolded patches (ghost norms where cheaper,
    formed per-example gradients elsewhere); it must give what opacus' conv sampler gives,
    with augmentation multiplicity too."""
    from dpvip.privacy import layer_rules

    torch.manual_seed(0)
    model = WideResNet(WRNSize(10, 1), num_classes=3).double()
    x = torch.randn(4 * views, 3, 12, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    labels = torch.tensor([0, 1, 2, 1]).repeat_interleave(views)

    def clipped(plain_conv: bool):
        monkeypatch.setattr(layer_rules, "_plain_conv", lambda layer: plain_conv and type(layer) is nn.Conv2d)
        summer = ClippedGradientSum(model, 0.05, views=views)
        _, norms = summer.add(lambda: nn.functional.cross_entropy(model(x), labels, reduction="none"))
        summer.close()
        return norms, summer.sums

    unfolded, sampled = clipped(True), clipped(False)
    torch.testing.assert_close(unfolded[0], sampled[0], rtol=1e-6, atol=0)
    for got, want in zip(unfolded[1], sampled[1]):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-9)
