"""Synthetic images from random processes, generated deterministically into webdataset shards.

Families (the registry below): `shaders` (shader-like procedural programs, the Shaders21k
stand-in of ViP), `stylegan_oriented` (untrained StyleGAN-Oriented, DP-RandP Phase I),
`dead_leaves` (DP-RandP's synthetic-data ablation), and images the user already has
(`image_folder`, `image_shards`), read from a path instead of generated. Modules: `seeding` (per-image seeds),
`family` (the common interface), one module per family, `spec` (a dataset as configured),
`shards` (writing, indexing and reading shards), `bench` (images/s).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class FamilyInfo:
    """What configuration checks need to know of a family, without importing torch."""

    target: str  # "module:class", imported on demand
    options: dict  # keyword options of the class beyond resolution, seed, device -> int or float
    power_of_two: bool = False  # resolution must be a power of two
    reads_path: bool = False  # reads the user's images from the dataset's `path`; generates nothing


FAMILIES = {
    "shaders": FamilyInfo("dpvip.synthetic.shaders:ShaderFamily", {"programs": int, "mix": int}),
    "stylegan_oriented": FamilyInfo(
        "dpvip.synthetic.stylegan:StyleGANOrientedFamily",
        {"rebuild_every": int, "channel_base": int, "channel_max": int, "block_size": int},
        power_of_two=True,
    ),
    "dead_leaves": FamilyInfo("dpvip.synthetic.dead_leaves:DeadLeavesFamily", {"r_min": float, "r_max": float}),
    "image_folder": FamilyInfo("dpvip.synthetic.image_folder:ImageFolderFamily", {}, reads_path=True),
    "image_shards": FamilyInfo("dpvip.synthetic.image_folder:ImageShardsFamily", {}, reads_path=True),
}
GENERATED_FAMILIES = tuple(name for name, info in FAMILIES.items() if not info.reads_path)


def family_class(name: str):
    module, cls = FAMILIES[name].target.split(":")
    return getattr(importlib.import_module(module), cls)


@dataclass(frozen=True)
class PaperDataset:
    """The dataset of the papers a family stands in for, at the size the papers used."""

    name: str
    paper: str
    images: int
    resolution: int


PAPER_DATASETS = {
    # ViP A.2: 1,300,000 images (its Sec. 4.1 says 1.05 million; A.2 describes the training)
    "shaders": PaperDataset("Shaders21k (21k GLSL programs)", "ViP", 1_300_000, 256),
    "stylegan_oriented": PaperDataset("StyleGAN-Oriented", "DP-RandP", 105_000, 128),
    "dead_leaves": PaperDataset("Dead leaves (mixed shapes)", "DP-RandP Table 10", 105_000, 128),
}
