"""The 3x3 filter bank of StyleGAN-Oriented: 8 edges and 8 lines at 22.5 degree steps, 4 sparse
filters, and the negatives of all 20; every filter of unit norm."""

import math

import torch

from dpvip.synthetic.oriented_filters import oriented_bank

OFFSETS = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64)
Y, X = torch.meshgrid(OFFSETS, OFFSETS, indexing="ij")


def test_forty_unit_norm_filters():
    bank = oriented_bank()
    assert bank.shape == (40, 3, 3) and bank.dtype == torch.float32
    assert torch.allclose(bank.flatten(1).norm(dim=1), torch.ones(40), atol=1e-6)


def test_edges_and_lines_are_zero_mean_and_the_rest_are_not_all():
    bank = oriented_bank().double()
    assert torch.allclose(bank[:16].mean(dim=(1, 2)), torch.zeros(16, dtype=torch.float64), atol=1e-7)
    assert bank[16].mean().abs() > 0.05  # the centre delta: a sparse filter that keeps the mean


def test_second_half_is_the_negative_of_the_first():
    bank = oriented_bank()
    assert torch.equal(bank[20:], -bank[:20])
    assert len({tuple(f.flatten().tolist()) for f in bank}) == 40  # no duplicate filters


def _edge_direction(kernel: torch.Tensor) -> float:
    """Direction (degrees) of the filter's gradient: its first moment."""
    return math.degrees(math.atan2(float((kernel * Y).sum()), float((kernel * X).sum())))


def test_edge_filters_are_rotations_by_22_5_degrees():
    edges = oriented_bank().double()[:8]
    directions = [_edge_direction(edge) for edge in edges]
    steps = [(b - a) % 360 for a, b in zip(directions, directions[1:])]
    assert all(abs(step - 22.5) < 1e-4 for step in steps), directions
    # Each edge is an odd (antisymmetric) filter: an edge detector, not a blob.
    assert all(torch.allclose(edge, -torch.flip(edge, dims=(0, 1)), atol=1e-6) for edge in edges)
    # Exact on the grid: the edge four steps on (90 degrees) is the quarter-turned edge.
    for k in range(4):
        assert torch.allclose(edges[k + 4], _quarter_turn(edges[k]), atol=1e-6)


def _quarter_turn(kernel: torch.Tensor) -> torch.Tensor:
    """The kernel rotated by +90 degrees in (x right, y down the rows) coordinates: k'(x, y) = k(y, -x)."""
    # k'(row=y, col=x) = k(row=-x, col=y): index arithmetic on the 3x3 grid.
    turned = torch.empty_like(kernel)
    for row in range(3):
        for col in range(3):
            turned[row, col] = kernel[2 - col, row]
    return turned


def test_line_filters_are_quarter_turns_of_each_other_and_symmetric():
    lines = oriented_bank().double()[8:16]
    for k in range(4):
        assert torch.allclose(lines[k + 4], _quarter_turn(lines[k]), atol=1e-6)
    assert all(torch.allclose(line, torch.flip(line, dims=(0, 1)), atol=1e-6) for line in lines)  # even filters
    assert len({tuple(line.flatten().round(decimals=6).tolist()) for line in lines}) == 8
