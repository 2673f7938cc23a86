"""Noise fields as tensor code: lattice value and gradient noise, fractal sums, pink noise.

Lattice noise hashes integer coordinates through a per-program permutation table (the
classic Perlin construction), so a program's noise is fixed by its seed and can be
evaluated at any coordinates, on any device.
"""

from __future__ import annotations

import math

import numpy as np
import torch

TABLE = 256


class LatticeNoise:
    """Value noise (random value per lattice point) or gradient noise (random unit gradient)."""

    def __init__(self, rng: np.random.Generator, kind: str, device: torch.device) -> None:
        self.kind = kind
        self.perm = torch.as_tensor(rng.permutation(TABLE), device=device)
        if kind == "value":
            self.values = torch.as_tensor(rng.uniform(-1, 1, TABLE), dtype=torch.float32, device=device)
        else:
            angles = rng.uniform(0, 2 * math.pi, TABLE)
            self.gradients = torch.as_tensor(
                np.stack([np.cos(angles), np.sin(angles)], 1), dtype=torch.float32, device=device
            )

    def hash(self, ix: torch.Tensor, iy: torch.Tensor) -> torch.Tensor:
        return self.perm[(self.perm[ix % TABLE] + iy) % TABLE]

    def _corner(self, ix, iy, fx, fy) -> torch.Tensor:
        h = self.hash(ix, iy)
        if self.kind == "value":
            return self.values[h]
        g = self.gradients[h]
        return g[..., 0] * fx + g[..., 1] * fy

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Noise in about [-1, 1] at coordinates (x, y), smooth (quintic fade) between lattice points."""
        x0, y0 = torch.floor(x), torch.floor(y)
        fx, fy = x - x0, y - y0
        ix, iy = x0.long(), y0.long()
        u = fx * fx * fx * (fx * (fx * 6 - 15) + 10)
        v = fy * fy * fy * (fy * (fy * 6 - 15) + 10)
        n00 = self._corner(ix, iy, fx, fy)
        n10 = self._corner(ix + 1, iy, fx - 1, fy)
        n01 = self._corner(ix, iy + 1, fx, fy - 1)
        n11 = self._corner(ix + 1, iy + 1, fx - 1, fy - 1)
        bottom = n00 + u * (n10 - n00)
        top = n01 + u * (n11 - n01)
        scale = 1.0 if self.kind == "value" else math.sqrt(2)
        return (bottom + v * (top - bottom)) * scale


def fbm(
    noise: LatticeNoise, x: torch.Tensor, y: torch.Tensor, octaves: int, lacunarity: float = 2.0, gain: float = 0.5
) -> torch.Tensor:
    """Fractal Brownian motion: octaves of `noise` at growing frequency and shrinking amplitude."""
    total = torch.zeros_like(x)
    amplitude, frequency, norm = 1.0, 1.0, 0.0
    for octave in range(octaves):
        # A per-octave offset keeps the octaves' lattices from lining up at the origin.
        shift = 17.31 * (octave + 1)
        total = total + amplitude * noise(x * frequency + shift, y * frequency - shift)
        norm += amplitude
        amplitude *= gain
        frequency *= lacunarity
    return total / norm


def pink_noise(white: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Filter white noise (N, H, W) to a 1/f^alpha spectrum (alpha per map); unit std per map."""
    height, width = white.shape[-2:]
    fy = torch.fft.fftfreq(height, device=white.device)[:, None]
    fx = torch.fft.rfftfreq(width, device=white.device)[None, :]
    radius = torch.sqrt(fx**2 + fy**2)
    radius[0, 0] = 1.0
    gain = radius[None] ** (-alpha[:, None, None])
    gain[:, 0, 0] = 0.0  # no DC component: zero-mean maps
    maps = torch.fft.irfft2(torch.fft.rfft2(white) * gain, s=(height, width))
    return maps / maps.flatten(1).std(dim=1).clamp_min(1e-8)[:, None, None]
