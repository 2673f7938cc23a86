"""The bank of 3x3 filters of StyleGAN-Oriented (Baradad et al. 2021, as ANCHORS.md states).

8 oriented edges and 8 oriented lines (rotations by 22.5 degrees, zero mean), 4 sparse /
centre-surround filters, and the negatives of all 20: 40 filters, each of unit L2 norm.
"""

from __future__ import annotations

import math

import torch

ANGLES = [k * math.pi / 8 for k in range(8)]


def _grid() -> tuple[torch.Tensor, torch.Tensor]:
    offsets = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64)
    y, x = torch.meshgrid(offsets, offsets, indexing="ij")
    return x, y


def _zero_mean_unit(filters: torch.Tensor) -> torch.Tensor:
    filters = filters - filters.mean(dim=(-2, -1), keepdim=True)
    return filters / filters.flatten(1).norm(dim=1)[:, None, None]


def oriented_bank() -> torch.Tensor:
    """(40, 3, 3) float32 filters."""
    x, y = _grid()
    edges = torch.stack([x * math.cos(a) + y * math.sin(a) for a in ANGLES])
    # A line through the centre at angle a: high on the line, falling off across it.
    lines = torch.stack([torch.exp(-((x * math.sin(a) - y * math.cos(a)) ** 2) * 2) for a in ANGLES])
    delta = torch.zeros(3, 3, dtype=torch.float64)
    delta[1, 1] = 1
    cross = torch.tensor([[0, -1, 0], [-1, 4, -1], [0, -1, 0]], dtype=torch.float64)
    diagonal = torch.tensor([[-1, 0, -1], [0, 4, 0], [-1, 0, -1]], dtype=torch.float64)
    surround = torch.full((3, 3), -1.0, dtype=torch.float64)
    surround[1, 1] = 8
    sparse = torch.stack([delta, cross, diagonal, surround])
    sparse = sparse / sparse.flatten(1).norm(dim=1)[:, None, None]
    bank = torch.cat([_zero_mean_unit(edges), _zero_mean_unit(lines), sparse])
    return torch.cat([bank, -bank]).float()
