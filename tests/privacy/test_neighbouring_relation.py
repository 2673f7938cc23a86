"""The relation the accounting assumes (add/remove one example) against what is released:
every sum the noise is added to changes by at most C when one example is removed, and by
up to 2C when one is replaced (so replace-one, which a public n suggests, is not claimed).
The releases divide these sums by n (q n), a count published outside the guarantee."""

import pytest
import torch
from torch import nn

from dpvip.privacy.clipping import ClippedGradientSum
from dpvip.transfer.private_probe import clipped_row_sum

C = 1.0
N = 24


def clipped_sum(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The full-batch release before its noise: the clipped per-example gradients, summed."""
    clipper = ClippedGradientSum(model, C)
    clipper.add(lambda: nn.functional.cross_entropy(model(x), y, reduction="none"))
    total = clipper.flat.clone()
    clipper.close()
    return total


@pytest.fixture
def data():
    generator = torch.Generator().manual_seed(0)
    return 5 * torch.randn(N, 6, generator=generator), torch.randint(0, 3, (N,), generator=generator)


def test_removing_one_example_moves_the_clipped_gradient_sum_by_at_most_c(data):
    x, y = data
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    whole = clipped_sum(model, x, y)
    moves = []
    for i in range(N):
        keep = torch.arange(N) != i
        moves.append(float((whole - clipped_sum(model, x[keep], y[keep])).norm()))
    assert max(moves) <= C * (1 + 1e-5) and max(moves) > 0.9 * C  # clipped: the bound is reached
    replaced = x.clone()
    replaced[0] = -x[1]  # replace-one: the removed example's gradient and its replacement's add up
    moved = float((whole - clipped_sum(model, replaced, y)).norm())
    assert moved > 1.2 * C  # above C: replace-one would need the noise of sensitivity 2C


def test_removing_one_feature_row_moves_the_private_means_sum_by_at_most_c(data):
    features = data[0]
    whole = clipped_row_sum(features, C)
    moves = [float((whole - clipped_row_sum(features[torch.arange(N) != i], C)).norm()) for i in range(N)]
    assert max(moves) <= C * (1 + 1e-5) and max(moves) > 0.99 * C
