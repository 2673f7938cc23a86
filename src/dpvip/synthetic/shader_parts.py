"""The building blocks of shader-like programs: coordinate maps, scalar fields, combiners.

Each part draws its parameters from the program's random generator when it is built and is
then a pure function of pixel coordinates (x, y) and time t, written as tensor code: the
same math a fragment shader runs per pixel, evaluated on the whole grid at once.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dpvip.synthetic.noise import LatticeNoise, fbm

TAU = 2 * math.pi


def _rotate(x, y, angle):
    c, s = math.cos(angle), math.sin(angle)
    return c * x - s * y, s * x + c * y


def _drift(rng: np.random.Generator, speed: float) -> tuple[float, float]:
    angle = rng.uniform(0, TAU)
    return speed * math.cos(angle), speed * math.sin(angle)


# Coordinate maps: (x, y, t) -> (x, y)


class Rotate:
    def __init__(self, rng, device):
        self.angle, self.spin = rng.uniform(0, TAU), rng.uniform(-0.6, 0.6)

    def __call__(self, x, y, t):
        return _rotate(x, y, self.angle + self.spin * t)


class Polar:
    """(angle, radius) as the new coordinates, with an integer angular frequency."""

    def __init__(self, rng, device):
        self.turns, self.scale = int(rng.integers(1, 5)), rng.uniform(0.5, 3)

    def __call__(self, x, y, t):
        return torch.atan2(y, x) * (self.turns / math.pi), torch.sqrt(x * x + y * y) * self.scale


class Kaleidoscope:
    """Fold the angle into one mirrored wedge of 2*pi/n."""

    def __init__(self, rng, device):
        self.wedge, self.spin = TAU / int(rng.integers(3, 13)), rng.uniform(-0.3, 0.3)

    def __call__(self, x, y, t):
        angle = torch.atan2(y, x) + self.spin * t
        angle = torch.abs(torch.remainder(angle, self.wedge) - self.wedge / 2)
        radius = torch.sqrt(x * x + y * y)
        return radius * torch.cos(angle), radius * torch.sin(angle)


class Repeat:
    """Tile the plane with period P (optionally mirrored tiles), as mod() does in shaders."""

    def __init__(self, rng, device):
        self.period, self.mirror = rng.uniform(0.25, 1.2), bool(rng.integers(2))

    def __call__(self, x, y, t):
        p = self.period
        if self.mirror:
            return torch.abs(torch.remainder(x, 2 * p) - p), torch.abs(torch.remainder(y, 2 * p) - p)
        return torch.remainder(x + p / 2, p) - p / 2, torch.remainder(y + p / 2, p) - p / 2


class Swirl:
    def __init__(self, rng, device):
        self.twist, self.spin = rng.uniform(-4, 4), rng.uniform(-0.5, 0.5)

    def __call__(self, x, y, t):
        angle = self.twist * torch.sqrt(x * x + y * y) + self.spin * t
        c, s = torch.cos(angle), torch.sin(angle)
        return c * x - s * y, s * x + c * y


class Warp:
    """Domain warping: displace the coordinates by two fractal noise fields."""

    def __init__(self, rng, device):
        self.noise = LatticeNoise(rng, str(rng.choice(["value", "gradient"])), device)
        self.amount, self.frequency = rng.uniform(0.1, 1.0), rng.uniform(0.5, 3)
        self.octaves, self.velocity = int(rng.integers(2, 5)), _drift(rng, rng.uniform(0, 0.4))

    def __call__(self, x, y, t):
        u = x * self.frequency + self.velocity[0] * t
        v = y * self.frequency + self.velocity[1] * t
        dx = fbm(self.noise, u, v, self.octaves)
        dy = fbm(self.noise, u + 5.2, v + 1.3, self.octaves)
        return x + self.amount * dx, y + self.amount * dy


# Scalar fields: (x, y, t) -> field


class Fractal:
    def __init__(self, rng, device):
        self.noise = LatticeNoise(rng, str(rng.choice(["value", "gradient"])), device)
        self.frequency, self.octaves = rng.uniform(1, 4), int(rng.integers(2, 6))
        self.gain, self.velocity = rng.uniform(0.35, 0.65), _drift(rng, rng.uniform(0, 0.5))
        self.ridged = bool(rng.random() < 0.3)

    def __call__(self, x, y, t):
        field = fbm(
            self.noise,
            x * self.frequency + self.velocity[0] * t,
            y * self.frequency + self.velocity[1] * t,
            self.octaves,
            gain=self.gain,
        )
        return 1 - 2 * torch.abs(field) if self.ridged else field


class Waves:
    """A sum of plane waves sin(k . p + omega t + phi)."""

    def __init__(self, rng, device):
        count = int(rng.integers(2, 5))
        angles = rng.uniform(0, TAU, count)
        norms = rng.uniform(2, 10, count)
        self.kx, self.ky = norms * np.cos(angles), norms * np.sin(angles)
        self.omega, self.phase = rng.uniform(-2, 2, count), rng.uniform(0, TAU, count)

    def __call__(self, x, y, t):
        return sum(
            torch.sin(kx * x + ky * y + (w * t + p)) for kx, ky, w, p in zip(self.kx, self.ky, self.omega, self.phase)
        ) / len(self.kx)


class Rings:
    def __init__(self, rng, device):
        self.centre = rng.uniform(-0.8, 0.8, 2)
        self.frequency, self.omega = rng.uniform(4, 20), rng.uniform(-3, 3)

    def __call__(self, x, y, t):
        radius = torch.sqrt((x - self.centre[0]) ** 2 + (y - self.centre[1]) ** 2)
        return torch.sin(self.frequency * radius - self.omega * t)


class Shape:
    """A signed distance field (circle, box, segment, cross), shown as contour bands or a glow."""

    KINDS = ("circle", "box", "segment", "cross")

    def __init__(self, rng, device):
        self.kind = str(rng.choice(self.KINDS))
        self.size, self.pulse = rng.uniform(0.1, 0.7), rng.uniform(0, 0.2)
        self.bands, self.frequency = bool(rng.integers(2)), rng.uniform(5, 25)
        self.omega = rng.uniform(-3, 3)

    def distance(self, x, y, size):
        if self.kind == "circle":
            return torch.sqrt(x * x + y * y) - size
        if self.kind == "box":
            qx, qy = torch.abs(x) - size, torch.abs(y) - size * 0.6
            outside = torch.sqrt(qx.clamp_min(0) ** 2 + qy.clamp_min(0) ** 2)
            return outside + torch.minimum(torch.maximum(qx, qy), torch.zeros_like(qx))
        if self.kind == "segment":
            return torch.sqrt((x - x.clamp(-size, size)) ** 2 + y * y) - 0.02
        return torch.minimum(torch.abs(x), torch.abs(y)) - size * 0.15  # cross

    def __call__(self, x, y, t):
        d = self.distance(x, y, self.size * (1 + self.pulse * math.sin(t)))
        if self.bands:
            return torch.sin(self.frequency * d - self.omega * t)
        return torch.exp(-torch.abs(d) * self.frequency * 0.5) * 2 - 1


class Cells:
    """Cellular (Worley) noise: distance to the nearest jittered, moving feature point."""

    def __init__(self, rng, device):
        self.noise = LatticeNoise(rng, "value", device)
        self.frequency, self.omega = rng.uniform(2, 8), rng.uniform(0.2, 2)
        self.edges = bool(rng.integers(2))  # F2 - F1 shows cell borders instead of blobs

    def __call__(self, x, y, t):
        x, y = x * self.frequency, y * self.frequency
        cx, cy = torch.floor(x), torch.floor(y)
        nearest = torch.full_like(x, 9.0)
        second = torch.full_like(x, 9.0)
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                gx, gy = cx + dx, cy + dy
                phase = self.noise.values[self.noise.hash(gx.long(), gy.long())] * math.pi
                px = gx + 0.5 + 0.4 * torch.sin(self.omega * t + phase * 3)
                py = gy + 0.5 + 0.4 * torch.cos(self.omega * t + phase * 5)
                d = torch.sqrt((x - px) ** 2 + (y - py) ** 2)
                second = torch.minimum(second, torch.maximum(nearest, d))
                nearest = torch.minimum(nearest, d)
        return (second - nearest) if self.edges else nearest


class Checker:
    def __init__(self, rng, device):
        self.frequency, self.sharpness = rng.uniform(2, 10), rng.uniform(1, 10)
        self.stripes, self.omega = bool(rng.integers(2)), rng.uniform(-2, 2)

    def __call__(self, x, y, t):
        wave = torch.sin(self.frequency * x + self.omega * t)
        if not self.stripes:
            wave = wave * torch.sin(self.frequency * y)
        return torch.tanh(self.sharpness * wave)


MAPS = (Rotate, Polar, Kaleidoscope, Repeat, Swirl, Warp)
FIELDS = (Fractal, Waves, Rings, Shape, Cells, Checker)


def combine(kind: str, weight: float, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """How a program merges its next field into what it has so far."""
    if kind == "add":
        return a + weight * b
    if kind == "mul":
        return a * b
    if kind == "max":
        return torch.maximum(a, weight * b)
    if kind == "min":
        return torch.minimum(a, weight * b)
    return torch.abs(a - weight * b)  # "diff"


COMBINERS = ("add", "mul", "max", "min", "diff")
