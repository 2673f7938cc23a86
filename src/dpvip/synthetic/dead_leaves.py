"""Dead leaves: opaque shapes dropped on the canvas until it is covered (DP-RandP Table 10).

Shapes (circles, squares, rectangles, triangles, randomly rotated) have radii drawn from
p(r) ~ 1/r^3 on [r_min, r_max] (in units of the image side), uniform positions and uniform
colours. They are painted front to back: each shape fills only pixels no earlier shape
covered, and painting stops when no pixel is left, which is the same image as dropping
shapes back to front forever. Each shape touches only its bounding box.
"""

from __future__ import annotations

import math

import numpy as np

from dpvip.synthetic.family import ImageFamily
from dpvip.synthetic.seeding import IMAGE, numpy_rng

SHAPES = ("circle", "square", "rectangle", "triangle")
DRAW_AHEAD = 256  # shapes drawn from the generator at a time (vectorised draws)


def radii(rng: np.random.Generator, count: int, r_min: float, r_max: float) -> np.ndarray:
    """Inverse-CDF samples of p(r) ~ r^-3 on [r_min, r_max]."""
    low, high = r_min**-2, r_max**-2
    return (low - rng.random(count) * (low - high)) ** -0.5


def _inside(
    kind: int, x: np.ndarray, y: np.ndarray, radius: float, angle: float, aspect: float, corners: np.ndarray
) -> np.ndarray:
    """Mask of the pixels (offsets x, y from the centre) inside one shape."""
    if kind == 0:
        return x * x + y * y <= radius * radius
    c, s = math.cos(angle), math.sin(angle)
    u, v = c * x + s * y, -s * x + c * y
    if kind == 1:
        half = radius / math.sqrt(2)
        return (np.abs(u) <= half) & (np.abs(v) <= half)
    if kind == 2:
        return (np.abs(u) <= radius) & (np.abs(v) <= radius * aspect)
    # A triangle inscribed in the circle of this radius: inside all three edges.
    px, py = radius * np.cos(corners + angle), radius * np.sin(corners + angle)
    inside = np.ones(np.broadcast_shapes(x.shape, y.shape), dtype=bool)
    for k in range(3):
        ax, ay, bx, by = px[k], py[k], px[(k + 1) % 3], py[(k + 1) % 3]
        inside &= (bx - ax) * (y - ay) - (by - ay) * (x - ax) >= 0
    return inside


class DeadLeavesFamily(ImageFamily):
    name = "dead_leaves"

    def __init__(
        self, resolution: int, seed: int = 0, device: str = "cpu", r_min: float = 0.03, r_max: float = 1.0
    ) -> None:
        super().__init__(resolution, seed, device)
        if not 0 < r_min < r_max:
            raise ValueError(f"dead_leaves needs 0 < r_min < r_max (got {r_min}, {r_max})")
        self.r_min, self.r_max = r_min, r_max
        self.centres = (np.arange(resolution) + 0.5) / resolution

    def render_one(self, index: int) -> np.ndarray:
        rng = numpy_rng(self.seed, self.name, IMAGE, index)
        size = self.resolution
        canvas = np.zeros((size, size, 3), dtype=np.uint8)
        free = np.ones((size, size), dtype=bool)
        left = size * size
        while left:
            count = DRAW_AHEAD
            kinds = rng.integers(0, len(SHAPES), count)
            rs = radii(rng, count, self.r_min, self.r_max)
            cx, cy = rng.random(count), rng.random(count)
            angles, aspects = rng.uniform(0, math.pi, count), rng.uniform(0.3, 1.0, count)
            corners = np.sort(rng.uniform(0, 2 * math.pi, (count, 3)), axis=1)
            colours = rng.integers(0, 256, (count, 3), dtype=np.uint8)
            lo_x = np.clip(np.floor((cx - rs) * size).astype(int), 0, size)
            hi_x = np.clip(np.ceil((cx + rs) * size).astype(int), 0, size)
            lo_y = np.clip(np.floor((cy - rs) * size).astype(int), 0, size)
            hi_y = np.clip(np.ceil((cy + rs) * size).astype(int), 0, size)
            for k in range(count):
                window = free[lo_y[k] : hi_y[k], lo_x[k] : hi_x[k]]
                if not window.any():
                    continue
                x = self.centres[lo_x[k] : hi_x[k]][None, :] - cx[k]
                y = self.centres[lo_y[k] : hi_y[k]][:, None] - cy[k]
                paint = _inside(kinds[k], x, y, rs[k], angles[k], aspects[k], corners[k]) & window
                canvas[lo_y[k] : hi_y[k], lo_x[k] : hi_x[k]][paint] = colours[k]
                window[paint] = False
                left -= int(paint.sum())
                if not left:
                    break
        return canvas

    def render_block(self, start: int, count: int) -> np.ndarray:
        return np.stack([self.render_one(i) for i in range(start, start + count)])
