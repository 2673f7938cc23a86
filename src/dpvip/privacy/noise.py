"""Privatising a summed clipped gradient: sum over ranks, add N(0, sigma^2 C^2) once, and
normalise by the expected batch size.

Every rank draws the same noise from a generator seeded by the run's keyed derivation of
(noise, step) (`dpvip.privacy.randomness`), after the all-reduce, so the noise enters the
global sum exactly once and every rank applies the same update without a broadcast. The
noise does not depend on the number of ranks. Each coordinate is the sum of four draws
divided by 2 (same law; see `randomness` for why).

Normalisation is by the expected batch size q * n, not by the realised one: the realised
size is data-dependent and not privatised, while q * n is public (opacus does the same, and
the ViP paper's equation 3 divides by the average batch size B).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from dpvip.privacy.randomness import RunRandomness

DRAWS = 4  # N(0, s^2) as (x1 + x2 + x3 + x4) / 2, as opacus' secure_mode draws it


def noise_generator(randomness: RunRandomness, step: int, device: torch.device, purpose: str = "noise"):
    """The generator of `step`'s noise (or of another noisy release: `purpose`)."""
    return torch.Generator(device=device).manual_seed(randomness.seed(purpose, step))


def gaussian_noise(shape: torch.Size | tuple, std: float, generator: torch.Generator) -> torch.Tensor:
    total = torch.zeros(shape, device=generator.device, dtype=torch.float32)
    for _ in range(DRAWS):
        total += torch.randn(shape, generator=generator, device=generator.device, dtype=torch.float32)
    return total * (std / DRAWS**0.5)


def privatize(
    sums: Sequence[torch.Tensor],
    noise_multiplier: float,
    clip_norm: float,
    expected_batch_size: float,
    generator: torch.Generator,
    all_reduce: Callable[[torch.Tensor], None] = lambda flat: None,
) -> list[torch.Tensor]:
    """(global sum of clipped gradients + N(0, (sigma C)^2)) / expected batch size, per tensor.

    `sums` are this rank's clipped sums; `all_reduce` sums a flat tensor over ranks in place."""
    flat = torch.cat([total.reshape(-1).float() for total in sums])
    all_reduce(flat)
    if noise_multiplier > 0:
        flat += gaussian_noise(flat.shape, noise_multiplier * clip_norm, generator)
    flat /= expected_batch_size
    return [part.view_as(total) for part, total in zip(flat.split([t.numel() for t in sums]), sums)]
