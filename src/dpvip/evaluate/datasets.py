"""Labelled images for the downstream evaluations, as normalised tensors.

- `photo_crops`: crops of 11 scikit-image photographs, one class each (`dpvip.data.photo_crops`),
  the embedded stand-in for the classification sets: train crops from the left 70% of each
  photo, test crops from the right 30%; resized to the encoder's input size, grey copied to
  three channels.
- `digits`: scikit-learn's handwritten digits (1,797 real 8x8 images, 10 classes): a seeded,
  stratified train/test split, upsampled likewise (a raw-pixel probe reaches 96.7% on it:
  it cannot tell encoders apart).
- `image_folder`: a torchvision ImageFolder tree (ImageNet, Places, iNat, ... at paper scale),
  read on demand (`FolderImages`).
- `labelled_shards`: webdataset shards whose samples carry a `cls` member.
Evaluation images are resized and centre-cropped (ViP A.3: 224 px at paper scale).
"""

from __future__ import annotations

import hashlib

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from dpvip.data import photo_crops
from dpvip.data.digits import CLASSES, MAX_VALUE, digits_split
from dpvip.data.images import IMAGENET_MEAN, IMAGENET_STD, decode_image
from dpvip.data.shard_reader import CorruptSample, ShardReader
from dpvip.errors import DpvipInputError, first_line
from dpvip.plan.data_paths import class_folders

if TYPE_CHECKING:
    from torchvision import transforms


@dataclass
class LabelledImages:
    images: torch.Tensor  # (n, 3, size, size), ImageNet-normalised
    labels: torch.Tensor  # (n,) int64
    classes: int
    name: str

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def image_size(self) -> int:
        """The side of its (square) images in pixels."""
        return min(self.images.shape[-2:])

    def digest(self) -> str:
        """SHA-256 of the images and labels: a DP run's noise stream depends on it, so a run on
        changed data never repeats the noise of the first."""
        digest = hashlib.sha256()
        for tensor in (self.images, self.labels):
            digest.update(str(tuple(tensor.shape)).encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()

    def subset(self, indices) -> LabelledImages:
        indices = torch.as_tensor(np.asarray(indices), dtype=torch.long)
        return LabelledImages(self.images[indices], self.labels[indices], self.classes, self.name)

    def batches(self, batch_size: int):
        """(images, labels) in order, `batch_size` at a time."""
        yield from zip(self.images.split(batch_size), self.labels.split(batch_size))

    def shuffled_batches(self, batch_size: int, generator: torch.Generator):
        """One epoch of full batches in an order drawn from `generator` (the rest dropped)."""
        order = torch.randperm(len(self), generator=generator)
        for start in range(0, len(self) // batch_size * batch_size, batch_size):
            chosen = order[start : start + batch_size]
            yield self.images[chosen], self.labels[chosen]


def _normalise(images: torch.Tensor) -> torch.Tensor:
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (images - mean) / std


def digits(image_size: int, test_fraction: float = 0.2, seed: int = 0) -> tuple[LabelledImages, LabelledImages]:
    """(train, test) of scikit-learn's digits, stratified by class, at `image_size`."""
    split = digits_splits(image_size, test_fraction, seed)
    return split["train"], split["test"]


def digits_splits(
    image_size: int, test_fraction: float = 0.2, seed: int = 0, validation_fraction: float = 0.0
) -> dict[str, LabelledImages]:
    """{'train', 'test'} of scikit-learn's digits, stratified by class (`dpvip.data.digits`),
    upsampled to `image_size`; with `validation_fraction`, 'train' is split again into
    'train' and 'validation'."""
    split = digits_split(test_fraction, seed, validation_fraction)
    return _splits(split, split["pixels"].astype(np.float32) / MAX_VALUE, CLASSES, "digits", image_size)


def photo_crops_splits(image_size: int, spec: dict | None = None) -> dict[str, LabelledImages]:
    """{'train', 'test'[, 'validation']} of the photo crops (`dpvip.data.photo_crops`) that
    `spec` names (train_per_class, test_per_class, seed, validation_fraction), resized to
    `image_size`."""
    spec = spec or {}
    options = {key: spec[key] for key in ("train_per_class", "test_per_class", "seed") if key in spec}
    split = photo_crops.photo_crops_split(**options, validation_fraction=float(spec.get("validation_fraction") or 0))
    pixels = split["pixels"].astype(np.float32) / 255.0
    return _splits(split, pixels, photo_crops.CLASSES, "photo_crops", image_size)


def _splits(split: dict, pixels: np.ndarray, classes: int, name: str, image_size: int) -> dict[str, LabelledImages]:
    """The labelled splits of grey `pixels` (n, h, w) in [0, 1], resized to `image_size` and
    copied to three channels; `split` holds 'labels', 'train', 'test' (and 'kept', 'held')."""
    grey = torch.from_numpy(pixels).unsqueeze(1)
    images = _normalise(
        F.interpolate(grey, size=(image_size, image_size), mode="bilinear", align_corners=False).expand(-1, 3, -1, -1)
    )
    whole = LabelledImages(images.contiguous(), torch.from_numpy(split["labels"]), classes, name)
    train, test = whole.subset(split["train"]), whole.subset(split["test"])
    if "held" not in split:
        return {"train": train, "test": test}
    return {"train": train.subset(split["kept"]), "validation": train.subset(split["held"]), "test": test}


def evaluation_transform(image_size: int) -> transforms.Compose:
    """Resize the short side to size / 0.875, then centre-crop (MAE's evaluation transform)."""
    from torchvision import transforms  # noqa: F811 - imported where used: ~2 s at import

    return transforms.Compose(
        [
            transforms.Resize(int(round(image_size / 0.875)), interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.CenterCrop(image_size),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )


def _named_class_folder(root: str, class_names: list[str] | None, **options):
    """torchvision's ImageFolder whose class list can be given (a class folder missing from
    the tree keeps its label and has no images); torchvision imported where used (~2 s)."""
    from torchvision.datasets import ImageFolder

    class NamedClassFolder(ImageFolder):
        def find_classes(self, directory):
            if class_names is None:
                return super().find_classes(directory)
            return list(class_names), {name: i for i, name in enumerate(class_names)}

    return NamedClassFolder(root, **options)


class FolderImages:
    """A torchvision ImageFolder tree read on demand (ImageNet, Places, iNat, ... at paper
    scale do not fit in memory): labels up front, images decoded when a subset or a batch
    is asked for. The same interface as LabelledImages: labels, classes, name, len,
    `subset` (in memory) and `batches`."""

    def __init__(
        self,
        root: str | Path,
        image_size: int,
        name: str | None = None,
        workers: int = 0,
        class_names: list[str] | None = None,
    ):
        """`class_names`: the label of each class folder, by name (a test split takes its
        training split's, so a class it lacks shifts no label); None: its own folders'."""
        root = Path(root)
        if not root.is_dir():
            raise DpvipInputError(f"image folder {root} does not exist")
        if class_names is not None:
            unknown = sorted(set(class_folders(root)) - set(class_names))
            if unknown:
                raise DpvipInputError(
                    f"image folder {root} has class folder(s) {', '.join(unknown)} that the training split lacks"
                )
        try:
            self.folder = _named_class_folder(
                str(root), class_names, transform=evaluation_transform(image_size), allow_empty=class_names is not None
            )
        except FileNotFoundError as err:  # no class folder, or a class folder without images
            raise DpvipInputError(f"image folder {root} holds no labelled images: {first_line(err)}") from None
        if not self.folder.samples:
            raise DpvipInputError(f"image folder {root} holds no labelled images")
        self.labels = torch.tensor(self.folder.targets, dtype=torch.long)
        self.class_names = list(self.folder.classes)
        self.classes, self.name, self.workers = len(self.class_names), name or root.name, workers
        self.image_size = image_size  # every image is centre-cropped to it

    def __len__(self) -> int:
        return len(self.labels)

    def digest(self) -> str:
        """SHA-256 of every image's bytes, path and label: a DP run's noise stream depends on
        it, so a run on changed data never repeats the noise of the first, even where an image
        was replaced by one of the same size with its modification time restored. One read of
        the folder per DP run (ImageNet's 140 GB: minutes, against the run's hours)."""
        digest = hashlib.sha256()
        for path, label in self.folder.samples:
            with open(path, "rb") as handle:
                content = hashlib.file_digest(handle, "sha256").hexdigest()
            digest.update(f"{path}\0{label}\0{content}\n".encode())
        return digest.hexdigest()

    def subset(self, indices) -> LabelledImages:
        indices = [int(i) for i in np.asarray(indices)]
        images = torch.stack([self.folder[i][0] for i in indices]) if indices else torch.empty(0)
        return LabelledImages(images, self.labels[indices], self.classes, self.name)

    def batches(self, batch_size: int):
        yield from torch.utils.data.DataLoader(self.folder, batch_size=batch_size, num_workers=self.workers)

    def shuffled_batches(self, batch_size: int, generator: torch.Generator):
        order = torch.randperm(len(self), generator=generator).tolist()
        yield from torch.utils.data.DataLoader(
            self.folder, batch_size=batch_size, sampler=order, num_workers=self.workers, drop_last=True
        )


def first_per_class(data, count: int) -> IndexedImages:
    """The first `count` examples of each class of `data` (all of a class that has fewer), in
    their order: a smaller training split, the same for every backbone."""
    labels = data.labels.numpy()
    kept = np.concatenate([np.flatnonzero(labels == label)[:count] for label in np.unique(labels)])
    return IndexedImages(data, np.sort(kept))


class IndexedImages:
    """The examples of `data` (LabelledImages or FolderImages) at `indices`, read from it only
    when a subset or a batch is asked for (a validation share of ImageNet is not decoded
    whole): labels, classes, name, len, `subset` and `batches`, as the data's."""

    def __init__(self, data, indices):
        self.data, self.indices = data, np.asarray(indices, dtype=np.int64)
        self.labels = data.labels[torch.from_numpy(self.indices)]
        self.classes, self.name = data.classes, data.name

    def __len__(self) -> int:
        return len(self.indices)

    def subset(self, indices) -> LabelledImages:
        return self.data.subset(self.indices[np.asarray(indices, dtype=np.int64)])

    def batches(self, batch_size: int):
        for start in range(0, len(self), batch_size):
            part = self.data.subset(self.indices[start : start + batch_size])
            yield part.images, part.labels


def image_folder(
    root: str | Path, image_size: int, name: str | None = None, workers: int = 0, class_names: list[str] | None = None
) -> FolderImages:
    return FolderImages(root, image_size, name, workers, class_names)


def folder_split_facts(train: FolderImages, test: FolderImages) -> dict:
    """Counts, and the classes the test split lacks (chance is then over the classes tested)."""
    tested = sorted({int(label) for label in test.labels.tolist()})
    facts = {"train": len(train), "test": len(test), "classes": train.classes, "classes_tested": len(tested)}
    missing = [name for i, name in enumerate(train.class_names) if i not in set(tested)]
    return facts | ({"classes_missing_from_test": missing} if missing else {})


def labelled_shards(index: str | Path, image_size: int, classes: int, name: str) -> tuple[LabelledImages, int]:
    """The samples of webdataset shards that have an image and a `cls` label; returns them
    and the number of corrupt samples skipped."""
    reader = ShardReader.from_index(index)
    transform = evaluation_transform(image_size)
    images, labels, skipped = [], [], 0
    for position in range(len(reader)):
        try:
            sample = reader[position]
            if "cls" not in sample:
                raise CorruptSample(f"sample {sample['__key__']} has no cls label")
            label = int(sample["cls"].decode().strip())
            image = transform(decode_image(sample))
        except DpvipInputError:  # the shard or its index is wrong: not one bad sample
            raise
        except (CorruptSample, ValueError):
            skipped += 1
            continue
        if not 0 <= label < classes:
            raise DpvipInputError(f"{index}: sample {sample['__key__']} has label {label}, outside 0..{classes - 1}")
        images.append(image)
        labels.append(label)
    if not images:
        raise DpvipInputError(f"{index}: no labelled image could be read")
    return LabelledImages(torch.stack(images), torch.tensor(labels), classes, name), skipped


SOURCES = ("photo_crops", "digits", "image_folder", "shards")


def labelled_split(name: str, spec: dict, image_size: int, workers: int = 0) -> tuple:
    """(train, test, facts) of the config entry `evaluate.datasets.<name>`; facts say what
    was read (the stand-in's name, counts, corrupt samples skipped)."""
    source = spec.get("source")
    if source == "digits":
        train, test = digits(image_size, spec.get("test_fraction", 0.2), spec.get("seed", 0))
        return train, test, {"stand_in": "scikit-learn digits", "train": len(train), "test": len(test)}
    if source == "photo_crops":
        split = photo_crops_splits(
            image_size, {key: value for key, value in spec.items() if key != "validation_fraction"}
        )
        train, test = split["train"], split["test"]
        return train, test, {"stand_in": photo_crops.STAND_IN, "train": len(train), "test": len(test)}
    if source == "image_folder":  # labels by class name: the training split's folders name the classes
        train = image_folder(spec["train"], image_size, name, workers)
        test = image_folder(spec["test"], image_size, name, workers, class_names=train.class_names)
        return train, test, folder_split_facts(train, test)
    if source == "shards":
        (train, skipped_train), (test, skipped_test) = (
            labelled_shards(spec[split], image_size, spec["classes"], name) for split in ("train", "test")
        )
        return train, test, {"train": len(train), "test": len(test), "skipped_corrupt": skipped_train + skipped_test}
    raise DpvipInputError(f"evaluate.datasets.{name}.source '{source}' is not one of {', '.join(SOURCES)}")
