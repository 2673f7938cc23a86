"""Alignment and uniformity (DP-RandP Phase I) against naive double loops."""

import math

import pytest
import torch
import torch.nn.functional as F

from dpvip.randp.contrastive import align_uniform_loss, alignment_loss, uniformity_loss

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def sphere(n: int, dim: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(n, dim, generator=generator, dtype=torch.float64), dim=1)


def naive_alignment(z1, z2, alpha):
    return sum(math.dist(a.tolist(), b.tolist()) ** alpha for a, b in zip(z1, z2)) / len(z1)


def naive_uniformity(z, t):
    terms = [
        math.exp(-t * math.dist(z[i].tolist(), z[j].tolist()) ** 2) for i in range(len(z)) for j in range(i + 1, len(z))
    ]
    return math.log(sum(terms) / len(terms))


@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_alignment_matches_a_loop(alpha):
    z1, z2 = sphere(7, 5, 0), sphere(7, 5, 1)
    assert alignment_loss(z1, z2, alpha).item() == pytest.approx(naive_alignment(z1, z2, alpha), rel=1e-10)


@pytest.mark.parametrize("t", [0.5, 2.0, 10.0])
def test_uniformity_matches_a_loop(t):
    z = sphere(9, 4, 2)
    assert uniformity_loss(z, t).item() == pytest.approx(naive_uniformity(z, t), rel=1e-10)


def test_combined_loss_averages_uniformity_over_the_two_views():
    z1, z2 = sphere(6, 3, 3), sphere(6, 3, 4)
    want = naive_alignment(z1, z2, 2) + (naive_uniformity(z1, 2) + naive_uniformity(z2, 2)) / 2
    assert align_uniform_loss(z1, z2).item() == pytest.approx(want, rel=1e-10)


def test_identical_views_align_perfectly():
    z = sphere(5, 8, 5)
    assert alignment_loss(z, z.clone()).item() == 0.0


def test_spread_points_are_more_uniform_than_clustered_ones():
    spread = sphere(64, 3, 6)
    clustered = F.normalize(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64) + 0.1 * sphere(64, 3, 7), dim=1)
    assert uniformity_loss(spread) < uniformity_loss(clustered)


def test_uniformity_has_gradients_and_stays_finite_for_large_t():
    z = sphere(8, 4, 8).requires_grad_()
    loss = uniformity_loss(z, t=1e4)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(z.grad).all()


def test_coinciding_embeddings_have_finite_gradients():
    """A collapsed batch is where uniformity must push apart (torch.pdist gives NaN here)."""
    z = sphere(1, 4, 9).repeat(4, 1).requires_grad_()
    uniformity_loss(z).backward()
    assert torch.isfinite(z.grad).all()
