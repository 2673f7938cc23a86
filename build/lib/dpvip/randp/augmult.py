"""Augmentation multiplicity's views (De et al. 2022, DP-RandP Phases II and III): K views
of each example, each a random crop of the image padded by 4 pixels (reflect) and a random
horizontal flip, drawn from the example's own seed of the step.

The views of a batch are returned example-major (rows iK ... iK + K - 1 are example i), as
`ClippedGradientSum(views=K)` expects. Every view depends on its example's seed only, so a
resumed run draws what an uninterrupted one draws, whatever the micro-batching.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F


def view_offsets(seed: int, views: int, padding: int) -> np.ndarray:
    """(views, 3): crop offsets (dy, dx) in [0, 2 * padding] and a flip bit, per view."""
    rng = np.random.default_rng(seed)
    offsets = rng.integers(0, 2 * padding + 1, size=(views, 2))
    flips = rng.integers(0, 2, size=(views, 1))
    return np.concatenate([offsets, flips], axis=1)


def augmult_views(images: torch.Tensor, seeds: Sequence[int], views: int, padding: int = 4) -> torch.Tensor:
    """(n, c, h, w) -> (n * views, c, h, w): each example's `views` crops and flips."""
    if views == 1 and padding == 0:
        return images
    n, _, height, width = images.shape
    padded = F.pad(images, (padding,) * 4, mode="reflect") if padding else images
    out = torch.empty(n * views, *images.shape[1:], dtype=images.dtype, device=images.device)
    for i, seed in enumerate(seeds):
        for k, (dy, dx, flip) in enumerate(view_offsets(int(seed), views, padding)):
            view = padded[i, :, dy : dy + height, dx : dx + width]
            out[i * views + k] = view.flip(-1) if flip else view
    return out
