"""Alignment and uniformity on the unit sphere (Wang & Isola 2020, "Understanding
Contrastive Representation Learning through Alignment and Uniformity"), DP-RandP's Phase I
loss with alpha = 2 and t = 2.

For L2-normalised embeddings z1, z2 of two views of the same n images:
- alignment = mean_i ||z1_i - z2_i||^alpha over the n positive pairs;
- uniformity(z) = log mean_{i<j} exp(-t ||z_i - z_j||^2) over the distinct pairs of one view,
  averaged over the two views.
"""

from __future__ import annotations

import torch


def alignment_loss(z1: torch.Tensor, z2: torch.Tensor, alpha: float = 2.0) -> torch.Tensor:
    """mean_i ||z1_i - z2_i||^alpha: zero when both views embed identically."""
    return (z1 - z2).norm(dim=1).pow(alpha).mean()


def uniformity_loss(z: torch.Tensor, t: float = 2.0) -> torch.Tensor:
    """log mean_{i<j} exp(-t ||z_i - z_j||^2): lower when the points spread over the sphere."""
    if z.shape[0] < 2:
        raise ValueError("uniformity needs at least two embeddings")
    # Squared distances from Gram entries, not torch.pdist: pdist's gradient is NaN where two
    # embeddings coincide (a collapsed batch), the case this loss must push apart.
    gram = z @ z.T
    norms = gram.diagonal()
    rows, cols = torch.triu_indices(z.shape[0], z.shape[0], offset=1, device=z.device)
    squared = (norms[rows] + norms[cols] - 2 * gram[rows, cols]).clamp(min=0)
    # logsumexp - log(count) is the log-mean without underflow of exp(-t d^2) for large t.
    return torch.logsumexp(-t * squared, dim=0) - torch.log(
        torch.tensor(float(squared.numel()), dtype=z.dtype, device=z.device)
    )


def align_uniform_loss(
    z1: torch.Tensor, z2: torch.Tensor, alpha: float = 2.0, t: float = 2.0, uniformity_weight: float = 1.0
) -> torch.Tensor:
    """alignment + weight * (uniformity(z1) + uniformity(z2)) / 2; DP-RandP uses weight 1."""
    uniformity = (uniformity_loss(z1, t) + uniformity_loss(z2, t)) / 2
    return alignment_loss(z1, z2, alpha) + uniformity_weight * uniformity
