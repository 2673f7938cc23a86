"""Semantic segmentation data (`SegmentationSet`), trained and scored by `segmentation`:
- `ade20k`: the ADEChallengeData2016 layout, held in memory after a resize of the short
  side and a centre crop. That fits small subsets; the paper's scale (20,210 training
  images, evaluated at full resolution with a sliding window) needs a streaming loader,
  and since the test images are scored on the same centre crops, numbers from this
  reader are not directly comparable with the paper's.
- `shapes_segmentation`: the embedded stand-in, semantic masks of the generated COCO
  stand-in (background 0, circle 1, square 2, triangle 3; nothing ignored).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from dpvip.errors import DpvipInputError
from dpvip.evaluate.coco_standin import SPLITS, CocoStandIn, render
from dpvip.evaluate.datasets import _normalise

IGNORE_INDEX = 255
ADE_CLASSES = 150
ADE_SPLITS = {"training": "training", "validation": "validation", "train": "training", "val": "validation"}
SHAPE_CLASSES = ("background", "circle", "square", "triangle")


@dataclass
class SegmentationSet:
    images: torch.Tensor  # (n, 3, size, size), ImageNet-normalised
    masks: torch.Tensor  # (n, size, size) int64: class 0..classes-1, or IGNORE_INDEX
    classes: int
    name: str

    def __len__(self) -> int:
        return len(self.masks)

    def subset(self, indices) -> SegmentationSet:
        indices = torch.as_tensor(np.asarray(indices), dtype=torch.long)
        return SegmentationSet(self.images[indices], self.masks[indices], self.classes, self.name)


def _to_tensors(pixels: list[np.ndarray], masks: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.from_numpy(np.stack(pixels)).permute(0, 3, 1, 2).float() / 255
    return _normalise(images).contiguous(), torch.from_numpy(np.stack(masks).astype(np.int64))


# --- ADE20K --------------------------------------------------------------------------------
def _short_side_and_centre(image: Image.Image, size: int, resample: int) -> Image.Image:
    width, height = image.size
    scale = size / min(width, height)
    resized = image.resize((max(size, round(width * scale)), max(size, round(height * scale))), resample)
    left, top = (resized.width - size) // 2, (resized.height - size) // 2
    return resized.crop((left, top, left + size, top + size))


def ade_labels(annotation: np.ndarray) -> np.ndarray:
    """ADE20K's 0 ("other") -> ignored, 1..150 -> 0..149 (mmseg's reduce_zero_label)."""
    labels = annotation.astype(np.int64) - 1
    labels[annotation == 0] = IGNORE_INDEX
    return labels


def ade20k(root: str | Path, split: str, image_size: int) -> SegmentationSet:
    """`images/<split>/*.jpg` with `annotations/<split>/<same stem>.png` of an
    ADEChallengeData2016 folder (split: training or validation), all in memory: images
    resized (bicubic) so the short side is `image_size` and centre-cropped, masks likewise
    with nearest-neighbour resampling."""
    if split not in ADE_SPLITS:
        raise DpvipInputError(f"ADE20K split '{split}' is not one of training, validation")
    root = Path(root)
    image_folder, label_folder = root / "images" / ADE_SPLITS[split], root / "annotations" / ADE_SPLITS[split]
    for folder in (image_folder, label_folder):
        if not folder.is_dir():
            raise DpvipInputError(f"ADE20K folder {folder} does not exist")
    paths = sorted(image_folder.glob("*.jpg"))
    if not paths:
        raise DpvipInputError(f"ADE20K folder {image_folder} holds no .jpg images")
    pixels, masks = [], []
    for path in paths:
        label_path = label_folder / f"{path.stem}.png"
        if not label_path.is_file():
            raise DpvipInputError(f"ADE20K annotation {label_path} of image {path.name} does not exist")
        with Image.open(path) as image:
            pixels.append(np.asarray(_short_side_and_centre(image.convert("RGB"), image_size, Image.BICUBIC)))
        with Image.open(label_path) as annotation:
            labels = np.asarray(_short_side_and_centre(annotation, image_size, Image.NEAREST))
        if labels.ndim != 2 or labels.max() > ADE_CLASSES:
            raise DpvipInputError(
                f"ADE20K annotation {label_path} is not a single-channel map of labels 0..{ADE_CLASSES}"
            )
        masks.append(ade_labels(labels))
    images, mask_tensor = _to_tensors(pixels, masks)
    return SegmentationSet(images, mask_tensor, ADE_CLASSES, f"ade20k-{ADE_SPLITS[split]}")


# --- the embedded stand-in -----------------------------------------------------------------
def shapes_segmentation(spec: CocoStandIn, split: str, count: int | None = None) -> SegmentationSet:
    """Images 1..count (default spec.images) of the COCO stand-in with semantic masks."""
    spec.check()
    if split not in SPLITS:
        raise DpvipInputError(f"split '{split}' is not one of {', '.join(SPLITS)}")
    count = spec.images if count is None else count
    if count < 1:
        raise DpvipInputError(f"shapes segmentation needs count >= 1, not {count}")
    # min_area only filters the rendered instances (it draws no randomness): at 1 every
    # visible shape pixel is labelled, also of fragments too small to be a COCO instance.
    every_fragment = replace(spec, min_area=1)
    pixels, masks = [], []
    for image_id in range(1, count + 1):
        image, shapes = render(every_fragment, split, image_id)
        semantic = np.zeros(image.shape[:2], dtype=np.int64)
        for category, visible in shapes:  # visible masks do not overlap: order is irrelevant
            semantic[visible] = category
        pixels.append(image)
        masks.append(semantic)
    images, mask_tensor = _to_tensors(pixels, masks)
    return SegmentationSet(images, mask_tensor, len(SHAPE_CLASSES), f"shapes-{split}")
