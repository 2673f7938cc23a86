"""The private datasets of DP-RandP Phases II and III, in memory as normalised tensors.

- `cifar10` / `cifar100`: torchvision's CIFAR readers on the python-format files under
  `root` (never downloaded: a missing folder is an error naming it); 50,000 train /
  10,000 test.
- `medmnist`: a MedMNIST `.npz` (DermaMNIST: `dermamnist.npz`, 7,007 train / 1,003
  validation / 2,005 test at 28 px, 7 classes), with its validation split, which the paper
  reports for DermaMNIST (Table 3) beside the test split (Table 16).
- `digits`: scikit-learn's digits (the embedded stand-in), upsampled, with an optional
  stratified validation split carved from the training split.

Images are resized to the training size and normalised with ImageNet's mean and std,
as in Phase I, so the Phase I features see the same input statistics.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from dpvip.errors import DpvipInputError
from dpvip.data.photo_crops import STAND_IN
from dpvip.evaluate.datasets import LabelledImages, _normalise, digits_splits, photo_crops_splits

SOURCES = ("photo_crops", "digits", "cifar10", "cifar100", "medmnist")


def _as_tensor_images(array: np.ndarray, image_size: int) -> torch.Tensor:
    """uint8 (n, h, w[, c]) -> normalised float (n, 3, size, size)."""
    images = torch.from_numpy(np.ascontiguousarray(array)).float() / 255.0
    images = images.unsqueeze(1) if images.ndim == 3 else images.permute(0, 3, 1, 2)
    if images.shape[1] == 1:
        images = images.expand(-1, 3, -1, -1)
    if images.shape[-1] != image_size:
        images = F.interpolate(
            images, size=(image_size, image_size), mode="bilinear", align_corners=False, antialias=True
        )
    return _normalise(images).contiguous()


def _labelled(array: np.ndarray, labels: np.ndarray, image_size: int, classes: int, name: str) -> LabelledImages:
    return LabelledImages(
        _as_tensor_images(array, image_size),
        torch.from_numpy(np.asarray(labels).reshape(-1).astype(np.int64)),
        classes,
        name,
    )


def _cifar(spec: dict, image_size: int, hundred: bool, name: str) -> dict:
    from torchvision.datasets import CIFAR10, CIFAR100

    reader = CIFAR100 if hundred else CIFAR10
    root = Path(spec.get("root") or "")
    try:
        splits = {split: reader(str(root), train=split == "train", download=False) for split in ("train", "test")}
    except RuntimeError as err:  # torchvision: "Dataset not found or corrupted"
        raise DpvipInputError(
            f"dprandp task {name}: no {reader.__name__} data under {root} ({err}); put the python-format files there"
        ) from None
    classes = 100 if hundred else 10
    return {
        split: _labelled(data.data, np.array(data.targets), image_size, classes, name) for split, data in splits.items()
    }


def _medmnist(spec: dict, image_size: int, name: str) -> dict:
    path = Path(spec.get("path") or "")
    if not path.is_file():
        raise DpvipInputError(f"dprandp task {name}: MedMNIST file {path} does not exist")
    with np.load(path) as data:
        classes = int(max(data[f"{split}_labels"].max() for split in ("train", "val", "test"))) + 1
        return {
            split: _labelled(data[f"{key}_images"], data[f"{key}_labels"], image_size, classes, name)
            for split, key in (("train", "train"), ("validation", "val"), ("test", "test"))
        }


def _digits(spec: dict, image_size: int) -> dict:
    return digits_splits(
        image_size, spec.get("test_fraction", 0.2), spec.get("seed", 0), float(spec.get("validation_fraction") or 0)
    )


def private_splits(name: str, spec: dict, image_size: int) -> tuple[dict[str, LabelledImages], dict]:
    """({'train', 'test'[, 'validation']}: LabelledImages, facts) of task `name`'s data spec."""
    source = spec.get("source")
    if source == "digits":
        splits, facts = _digits(spec, image_size), {"stand_in": "scikit-learn digits"}
    elif source == "photo_crops":
        splits, facts = photo_crops_splits(image_size, spec), {"stand_in": STAND_IN}
    elif source in ("cifar10", "cifar100"):
        splits, facts = _cifar(spec, image_size, source == "cifar100", name), {}
    elif source == "medmnist":
        splits, facts = _medmnist(spec, image_size, name), {}
    else:
        raise DpvipInputError(f"dprandp.private.tasks.{name}.data.source '{source}' is not one of {', '.join(SOURCES)}")
    counts = {split: len(splits[split]) if split in splits else None for split in ("train", "test", "validation")}
    # The class count gives the tables their chance level (10 for digits, whatever task it stands in for).
    return splits, facts | counts | {"classes": splits["train"].classes}
