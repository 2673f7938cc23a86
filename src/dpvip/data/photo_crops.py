"""Photo crops: the embedded stand-in for the labelled classification sets (ImageNet, CIFAR-10,
CIFAR-100) where the features of an encoder can matter and DP can learn.

Each class is one photograph that ships with scikit-image (grayscale: textures, scenes,
micrographs, text), and its examples are square crops of it: a side of 15-40% of the photo's
shorter side, a random position, a random horizontal flip, resized to SIZE px. Training crops
come from the left 70% of each photo and test crops from the right 30%, so no test pixel is
seen in training. None of these photographs is one the LAION stand-in crops
(`dpvip.data.natural.PHOTOS`), and the synthetic sets are procedural: no pre-training pixel
appears downstream (tests/data/test_photo_crops.py checks both).

Why not digits: a logistic regression on raw digits pixels reaches 96.7%, so a probe on any
encoder's features lands near it and cannot tell encoders apart, and 1,437 training images
leave DP at chance. Here the raw-pixel logistic regression reaches about 34% (chance 9.1%)
and there are 400 training crops a class.

Crop `i` of a class is drawn from `dpvip.seeds.derive(seed, class, split, i)` alone, so the
set is a pure function of its settings; it is kept in the disk memo (`dpvip.memo`): loading
scikit-image costs a job seconds.
"""

from __future__ import annotations

import numpy as np

from dpvip.data.digits import check_fraction
from dpvip.errors import DpvipInputError
from dpvip.memo import memoised
from dpvip.seeds import derive

# scikit-image's bundled grayscale photographs, none of them a LAION stand-in photo. Their
# order is the class order: a change to it changes every label.
PHOTOS = (
    "brick",
    "camera",
    "cell",
    "clock",
    "coins",
    "grass",
    "gravel",
    "microaneurysms",
    "moon",
    "page",
    "text",
)
CLASSES = len(PHOTOS)
SIZE = 32  # the crops' side in pixels, before a consumer resizes them to its image size
CROP_SIDE = (0.15, 0.40)  # a crop's side, as a fraction of the photo's shorter side
TEST_FROM = 0.7  # train crops lie left of this fraction of the width, test crops right of it
SPLITS = {"train": 0, "test": 1}
STAND_IN = "photo crops (11 scikit-image photographs)"
TRAIN_PER_CLASS, TEST_PER_CLASS = 400, 150


def split_sizes(spec: dict | None = None) -> dict[str, int]:
    """{'train', 'validation', 'test'} sizes of the split a config entry (train_per_class,
    test_per_class, validation_fraction) asks for, without making it."""
    spec = spec or {}
    train, test = int(spec.get("train_per_class", TRAIN_PER_CLASS)), int(spec.get("test_per_class", TEST_PER_CLASS))
    held = round(float(spec.get("validation_fraction") or 0) * train)
    return {"train": (train - held) * CLASSES, "validation": held * CLASSES, "test": test * CLASSES}


def load_photo(name: str) -> np.ndarray:
    """Photo `name` as (H, W) float32 in [0, 1]."""
    import skimage.data

    try:
        image = np.asarray(getattr(skimage.data, name)(), dtype=np.float32)
    except Exception as err:  # a scikit-image build that would fetch it
        raise DpvipInputError(f"photo '{name}' of scikit-image is not available offline: {err}") from None
    if image.ndim == 3:
        image = image[..., :3] @ np.array([0.2125, 0.7154, 0.0721], dtype=np.float32)
    return image / 255.0 if image.max() > 1.5 else image


def crop_box(photo_shape: tuple[int, int], split: str, rng: np.random.Generator) -> tuple[int, int, int]:
    """(top, left, side) of one crop of a photo of `photo_shape` in `split`'s region."""
    height, width = photo_shape
    left, right = (0, int(TEST_FROM * width)) if split == "train" else (int(TEST_FROM * width), width)
    side = int(rng.uniform(*CROP_SIDE) * min(height, width))
    side = max(4, min(side, right - left, height))
    return int(rng.integers(0, height - side + 1)), int(rng.integers(left, right - side + 1)), side


def _crop(photo: np.ndarray, split: str, rng: np.random.Generator) -> tuple[np.ndarray, tuple[int, int, int]]:
    from PIL import Image

    top, left, side = crop_box(photo.shape, split, rng)
    patch = photo[top : top + side, left : left + side]
    if rng.random() < 0.5:
        patch = patch[:, ::-1]
    resized = Image.fromarray(np.ascontiguousarray(patch * 255).astype(np.uint8)).resize((SIZE, SIZE), Image.BILINEAR)
    return np.asarray(resized, dtype=np.uint8), (top, left, side)


def photo_crops_split(
    train_per_class: int = TRAIN_PER_CLASS,
    test_per_class: int = TEST_PER_CLASS,
    seed: int = 0,
    validation_fraction: float = 0.0,
) -> dict[str, np.ndarray]:
    """{'pixels' (n, SIZE, SIZE) uint8, 'labels' (n,) int64, 'boxes' (n, 3) (top, left, side)
    of each crop in its photo, 'train', 'test'} with the sorted indices of each split; with
    `validation_fraction`, also 'kept' and 'held': sorted positions within 'train' of a
    stratified split (the same seed). Do not modify the arrays: they are shared."""
    for key, value in (("train_per_class", train_per_class), ("test_per_class", test_per_class)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise DpvipInputError(f"photo crops: {key} must be a positive integer (got {value!r})")
    check_fraction("validation_fraction", validation_fraction, low_inclusive=True)
    return _split(train_per_class, test_per_class, seed, validation_fraction)


@memoised("photo_crops", ("data/photo_crops.py",), ("scikit-image", "pillow", "numpy"))
def _split(train_per_class: int, test_per_class: int, seed: int, validation_fraction: float) -> dict[str, np.ndarray]:
    pixels, labels, boxes, splits = [], [], [], []
    for label, name in enumerate(PHOTOS):
        photo = load_photo(name)
        for split, count in (("train", train_per_class), ("test", test_per_class)):
            for index in range(count):
                crop, box = _crop(photo, split, np.random.default_rng(derive(seed, label, SPLITS[split], index)))
                pixels.append(crop)
                labels.append(label)
                boxes.append(box)
                splits.append(SPLITS[split])
    splits, labels = np.asarray(splits), np.asarray(labels, dtype=np.int64)
    found = {
        "pixels": np.stack(pixels),
        "labels": labels,
        "boxes": np.asarray(boxes, dtype=np.int64),
        "train": np.flatnonzero(splits == SPLITS["train"]),
        "test": np.flatnonzero(splits == SPLITS["test"]),
    }
    if validation_fraction:
        rng = np.random.default_rng(derive(seed, len(PHOTOS)))
        train_labels = labels[found["train"]]
        held = [
            rng.permutation(np.flatnonzero(train_labels == label))[: round(validation_fraction * train_per_class)]
            for label in range(CLASSES)
        ]
        found["held"] = np.sort(np.concatenate(held))
        found["kept"] = np.setdiff1d(np.arange(len(train_labels)), found["held"])
    return found
