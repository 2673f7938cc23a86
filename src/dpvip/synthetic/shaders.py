"""Shader-like procedural programs: the stand-in for Shaders21k (ViP's (Syn)-ViP data).

A program is drawn from its seed: one to three coordinate maps (rotation, polar and
kaleidoscope folds, tiling, swirl, domain warping), one to three scalar fields (fractal
value/gradient noise, plane waves, rings, distance fields, cellular noise, checkers) merged
by random combiners, an optional banding, and a cosine colour palette, optionally shaded by
a second field. Each image renders program `index mod programs` at a time t ~ U(0.1, 10),
as Shaders21k renders a random program at a random iTime. With `mix` > 1 an image is the
convex mix of `mix` renders with Dirichlet(1, ..., 1) weights (the "MixUp" variant).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dpvip.synthetic import shader_parts as parts
from dpvip.synthetic.family import ImageFamily, to_uint8
from dpvip.synthetic.seeding import IMAGE, PROGRAM, numpy_rng

TIME_RANGE = (0.1, 10.0)


def _standardise(field: torch.Tensor) -> torch.Tensor:
    return (field - field.mean()) / field.std().clamp_min(1e-6)


class Program:
    """One random image program; `render(x, y, t)` gives (3, H, W) colours in [0, 1]."""

    def __init__(self, rng: np.random.Generator, device: torch.device) -> None:
        self.zoom = math.exp(rng.uniform(math.log(0.5), math.log(2.5)))
        self.maps = [parts.MAPS[i](rng, device) for i in rng.choice(len(parts.MAPS), rng.integers(1, 4), replace=False)]
        self.fields = [parts.FIELDS[i](rng, device) for i in rng.integers(0, len(parts.FIELDS), rng.integers(1, 4))]
        self.combiners = [(str(rng.choice(parts.COMBINERS)), rng.uniform(0.3, 1.5)) for _ in self.fields[1:]]
        self.banding = rng.uniform(1, 4) if rng.random() < 0.3 else None
        self.contrast = rng.uniform(0.4, 1.2)
        self.palette = rng.uniform(
            [[0.2] * 3, [0.2] * 3, [0.3] * 3, [0] * 3], [[0.8] * 3, [0.5] * 3, [1.5] * 3, [1] * 3]
        )
        self.shading = parts.FIELDS[rng.integers(len(parts.FIELDS))](rng, device) if rng.random() < 0.5 else None

    def render(self, x: torch.Tensor, y: torch.Tensor, t: float) -> torch.Tensor:
        x, y = x * self.zoom, y * self.zoom
        for coordinate_map in self.maps:
            x, y = coordinate_map(x, y, t)
        value = self.fields[0](x, y, t)
        for field, (kind, weight) in zip(self.fields[1:], self.combiners):
            value = parts.combine(kind, weight, value, field(x, y, t))
        value = _standardise(value) * self.contrast
        if self.banding is not None:
            value = value * self.banding - torch.floor(value * self.banding)
        offset, amplitude, frequency, phase = (
            torch.as_tensor(row, dtype=value.dtype, device=value.device)[:, None, None] for row in self.palette
        )
        colour = offset + amplitude * torch.cos(parts.TAU * (frequency * value + phase))
        if self.shading is not None:
            colour = colour * (0.55 + 0.45 * torch.tanh(_standardise(self.shading(x, y, t))))
        return colour.clamp(0, 1)


class ShaderFamily(ImageFamily):
    name = "shaders"

    def __init__(
        self, resolution: int, seed: int = 0, device: str = "cpu", programs: int = 21000, mix: int = 1
    ) -> None:
        super().__init__(resolution, seed, device)
        self.programs, self.mix = programs, mix
        centres = (torch.arange(resolution, dtype=torch.float32, device=self.device) + 0.5) / resolution * 2 - 1
        self.y, self.x = torch.meshgrid(-centres, centres, indexing="ij")

    def program(self, program_id: int) -> Program:
        return Program(numpy_rng(self.seed, self.name, PROGRAM, program_id), self.device)

    def _components(self, index: int) -> tuple[list[int], list[float], np.ndarray]:
        """(program ids, times, mixing weights) of image `index`."""
        rng = numpy_rng(self.seed, self.name, IMAGE, index)
        times = rng.uniform(*TIME_RANGE, self.mix).tolist()
        if self.mix == 1:
            return [index % self.programs], times, np.ones(1)
        return rng.integers(0, self.programs, self.mix).tolist(), times, rng.dirichlet(np.ones(self.mix))

    def render_block(self, start: int, count: int) -> np.ndarray:
        images = []
        for index in range(start, start + count):
            ids, times, weights = self._components(index)
            image = sum(float(w) * self.program(p).render(self.x, self.y, t) for p, t, w in zip(ids, times, weights))
            images.append(image)
        return to_uint8(torch.stack(images))

    def metadata(self, index: int) -> dict:
        ids, times, weights = self._components(index)
        if self.mix == 1:
            return {"program": ids[0], "time": round(times[0], 6)}
        return {
            "programs": ids,
            "times": [round(t, 6) for t in times],
            "weights": [round(float(w), 6) for w in weights],
        }
