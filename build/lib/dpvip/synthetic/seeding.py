"""Per-image and per-network seeds: every random draw is a pure function of its keys.

A seed is derived from (dataset seed, family, purpose, number) with numpy's SeedSequence,
so image `i` of a dataset is the same whichever job, shard split or batch renders it.
"""

from __future__ import annotations

import zlib

import numpy as np
import torch

from dpvip.seeds import derive

# What a seed is for; part of the key so an image's and a network's streams never coincide.
IMAGE, PROGRAM, NETWORK = 0, 1, 2


def derive_seed(dataset_seed: int, family: str, purpose: int, number: int) -> int:
    """A 63-bit seed (torch's generators take signed 64-bit) for one (family, purpose, number)."""
    return derive(dataset_seed, zlib.crc32(family.encode()), purpose, number)


def numpy_rng(dataset_seed: int, family: str, purpose: int, number: int) -> np.random.Generator:
    return np.random.default_rng(derive_seed(dataset_seed, family, purpose, number))


def torch_rng(dataset_seed: int, family: str, purpose: int, number: int) -> torch.Generator:
    """A CPU generator: draws are made on the CPU, so they do not depend on the device."""
    return torch.Generator().manual_seed(derive_seed(dataset_seed, family, purpose, number))
