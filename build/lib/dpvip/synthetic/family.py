"""The interface every synthetic image family implements, and block-aligned rendering.

Families that render several images in one batched call (StyleGAN-Oriented) always render
the same aligned block of global indices together: floating-point results can depend on the
batch a kernel sees, and an image must not depend on which shard or job asked for it.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator

import numpy as np
import torch


class ImageFamily(ABC):
    """A deterministic image generator: image `i` is a pure function of (options, seed, i)."""

    name: str = ""
    #: images rendered together; blocks start at multiples of this global index
    block_size: int = 1

    def __init__(self, resolution: int, seed: int = 0, device: str = "cpu") -> None:
        self.resolution = resolution
        self.seed = seed
        self.device = torch.device(device)

    @abstractmethod
    def render_block(self, start: int, count: int) -> np.ndarray:
        """Images start .. start+count-1 as uint8 (count, H, W, 3); start is block-aligned."""

    def metadata(self, index: int) -> dict:
        """What identifies image `index` beyond its family and index (program, network, time)."""
        return {}

    def images(self, start: int, stop: int) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (index, image) for start <= index < stop, rendering whole aligned blocks."""
        block = self.block_size
        first = start - start % block
        for block_start in range(first, stop, block):
            rendered = self.render_block(block_start, block)
            for offset, image in enumerate(rendered):
                index = block_start + offset
                if start <= index < stop:
                    yield index, image


def to_uint8(images: torch.Tensor) -> np.ndarray:
    """(N, 3, H, W) floats in [0, 1] -> (N, H, W, 3) uint8, rounding half up."""
    scaled = (images.clamp(0, 1) * 255 + 0.5).floor().to(torch.uint8)
    return scaled.permute(0, 2, 3, 1).contiguous().cpu().numpy()


@contextlib.contextmanager
def thread_invariant(device: torch.device):
    """Run the block on one CPU thread. Some torch CPU kernels (bilinear upsampling, FFT)
    round differently with different thread counts; images must not depend on how many
    threads a job has. Other devices are left alone."""
    if device.type != "cpu":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
