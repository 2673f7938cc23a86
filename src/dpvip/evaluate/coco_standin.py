"""A generated COCO-format instance set: the embedded stand-in for COCO 2017 (ViP Table 4).

Each image is a smooth random texture with 1 to `max_objects` filled shapes (circle,
square, triangle; random position and rotation, a radius of 20-40% of the image) drawn in
order, so later shapes occlude earlier ones. Each category has its own band of hues (red,
green, blue; +-0.12 of the hue circle around its centre, saturation and brightness 0.6-1),
as COCO's categories have their own looks: the category can be seen in a patch, while the
object still has to be told from a background of every colour by its flat fill and edges.
At CPU size (32-64 px, 20 steps) a detector and a segmenter then learn well beyond their
trivial baselines (box AP ~6 points against ~1; mIoU ~75% against ~17%), which the first
design (shapes of 8-25% of the image in random colours) did not: every prediction there was
background. Every shape's visible pixels are its instance mask, stored as COCO RLE with its
box and area; a shape left with fewer than `min_area` visible pixels is dropped. Each image
is a pure function of (seed, split, image id).

Written as COCO expects: `<out>/<split>/<id>.png` and `<out>/<split>.json` (images,
annotations, categories), readable by pycocotools and torchvision's CocoDetection.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import colorsys

import numpy as np
from PIL import Image

from dpvip.errors import DpvipInputError
from dpvip.files import atomic_target, writable_target, write_json
from dpvip.seeds import derive

CATEGORIES = ("circle", "square", "triangle")
SPLITS = {"train": 0, "val": 1}
RADIUS = (0.2, 0.4)  # of the image's side: a shape spans several 4 px patches at 32 px
HUE_SPREAD = 0.12  # each category's hues: its centre (0, 1/3, 2/3) +- this; the bands never meet


@dataclass(frozen=True)
class CocoStandIn:
    images: int
    image_size: int = 64
    max_objects: int = 3
    min_area: int = 16
    seed: int = 0

    def check(self) -> None:
        if self.images < 1 or self.image_size < 16 or self.max_objects < 1 or self.min_area < 1:
            raise DpvipInputError(
                f"COCO stand-in needs images >= 1, image_size >= 16, max_objects >= 1, min_area >= 1 (got {self})"
            )


def _texture(rng: np.random.Generator, size: int) -> np.ndarray:
    """A smooth colour texture: a coarse random grid, upsampled bicubically."""
    coarse = rng.integers(0, 256, size=(rng.integers(3, 9), rng.integers(3, 9), 3), dtype=np.uint8)
    return np.array(Image.fromarray(coarse).resize((size, size), Image.BICUBIC))  # a writable copy


def _shape_mask(rng: np.random.Generator, category: str, size: int) -> np.ndarray:
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) + 0.5
    cx, cy = rng.uniform(0.15, 0.85, size=2) * size
    radius = rng.uniform(*RADIUS) * size
    if category == "circle":
        return (x - cx) ** 2 + (y - cy) ** 2 <= radius**2
    angle = rng.uniform(0, np.pi)
    u = (x - cx) * np.cos(angle) + (y - cy) * np.sin(angle)
    v = -(x - cx) * np.sin(angle) + (y - cy) * np.cos(angle)
    if category == "square":
        return (np.abs(u) <= radius / np.sqrt(2)) & (np.abs(v) <= radius / np.sqrt(2))
    corners = [
        (radius * np.cos(a), radius * np.sin(a))
        for a in (np.pi / 2, np.pi / 2 + 2 * np.pi / 3, np.pi / 2 + 4 * np.pi / 3)
    ]
    inside = np.ones_like(u, dtype=bool)
    for (x0, y0), (x1, y1) in zip(corners, corners[1:] + corners[:1]):
        inside &= (x1 - x0) * (v - y0) - (y1 - y0) * (u - x0) >= 0
    return inside


def category_colour(rng: np.random.Generator, category: int) -> np.ndarray:
    """An RGB colour (uint8) from category `category`'s band of hues (0-based category)."""
    hue = (category / len(CATEGORIES) + rng.uniform(-HUE_SPREAD, HUE_SPREAD)) % 1.0
    saturation, value = rng.uniform(0.6, 1.0, size=2)
    return np.round(255 * np.array(colorsys.hsv_to_rgb(hue, saturation, value))).astype(np.uint8)


def render(spec: CocoStandIn, split: str, image_id: int) -> tuple[np.ndarray, list[tuple[int, np.ndarray]]]:
    """(image (H, W, 3) uint8, [(category id, visible mask)]) of one image."""
    rng = np.random.default_rng(derive(spec.seed, SPLITS[split], image_id))
    image = _texture(rng, spec.image_size)
    shapes = []
    for _ in range(rng.integers(1, spec.max_objects + 1)):
        category = int(rng.integers(len(CATEGORIES)))
        mask = _shape_mask(rng, CATEGORIES[category], spec.image_size)
        image[mask] = category_colour(rng, category)
        shapes = [(c, m & ~mask) for c, m in shapes]  # occluded by the new shape
        shapes.append((category + 1, mask))  # COCO category ids start at 1
    return image, [(c, m) for c, m in shapes if m.sum() >= spec.min_area]


def _annotation(annotation_id: int, image_id: int, category: int, mask: np.ndarray) -> dict:
    from pycocotools import mask as mask_utils

    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    x, y, w, h = mask_utils.toBbox(rle).tolist()
    rle["counts"] = rle["counts"].decode("ascii")
    return {
        "id": annotation_id,
        "image_id": image_id,
        "category_id": category,
        "segmentation": rle,
        "area": float(mask.sum()),
        "bbox": [x, y, w, h],
        "iscrowd": 0,
    }


def write_split(spec: CocoStandIn, split: str, out: str | Path) -> Path:
    """Images and `<split>.json` under `out`; returns the annotation file."""
    spec.check()
    if split not in SPLITS:
        raise DpvipInputError(f"split '{split}' is not one of {', '.join(SPLITS)}")
    out = Path(out)
    images, annotations = [], []
    for image_id in range(1, spec.images + 1):
        pixels, shapes = render(spec, split, image_id)
        name = f"{split}/{image_id:06d}.png"
        with atomic_target(writable_target(out / name)) as partial:
            Image.fromarray(pixels).save(partial, format="PNG")
        images.append({"id": image_id, "file_name": name, "width": spec.image_size, "height": spec.image_size})
        for category, mask in shapes:
            annotations.append(_annotation(len(annotations) + 1, image_id, category, mask))
    record = {
        "info": {
            "description": "dpvip generated stand-in for COCO 2017 instances (shapes on textures)",
            "split": split,
            "seed": spec.seed,
        },
        "images": images,
        "annotations": annotations,
        "categories": [{"id": i + 1, "name": name, "supercategory": "shape"} for i, name in enumerate(CATEGORIES)],
    }
    write_json(record, out / f"{split}.json")
    return out / f"{split}.json"
