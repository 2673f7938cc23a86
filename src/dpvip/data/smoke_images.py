"""The labelled images the paper-shape smoke run (config/smoke.yaml) reads in place of the
papers' labelled sets, made from natural crops whose class is the photograph a crop comes from:

- `<folder>/{train,test}/<photo>/*.jpg`: torchvision ImageFolder trees at 256 px, for ImageNet,
  Places, iNat, Aircraft, Caltech-101 and CIFAR in `evaluate` and `dp_transfer`;
- `<folder>/medmnist.npz`: a MedMNIST-format file at 28 px (train, val, test), for DP-RandP's
  CIFAR-10, CIFAR-100 and DermaMNIST tasks.

The paper config reads such data where it lies (`source: image_folder`, `source: medmnist`);
no rule makes it, so this script writes it before the run, into the working directory:

    python -m dpvip.data.smoke_images [FOLDER]  # default results/data/smoke_images

Crops come from the LAION stand-in's generator (`dpvip.data.natural`) with another seed, so
the files are a pure function of the constants below: a rerun rewrites the same bytes.
"""

import io
import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from dpvip.data.natural import NaturalSpec, crop_sample

FOLDER = "results/data/smoke_images"
CLASSES = ("astronaut", "chelsea")  # two photographs: a 2-way task
# Few-shot K in config/smoke.yaml (5) must not exceed the train images per class.
PER_CLASS = {"train": 5, "val": 2, "test": 2}
FOLDER_SPLITS = ("train", "test")  # the ImageFolder trees; the .npz has all three
RESOLUTION = 256  # stored size; the jobs resize to their own (224, 384, 32)
MEDMNIST_RESOLUTION = 28  # MedMNIST's size
SEED = 7  # not the LAION stand-in's seed 0: other crops than the ones DP-MAE trains on


def labelled_crops() -> dict[str, list[tuple[int, bytes]]]:
    """{split: [(class, JPEG bytes)]}: the first crops of each class photo, in index order."""
    wanted = {(split, name): count for split, count in PER_CLASS.items() for name in CLASSES}
    spec = NaturalSpec(images=1, resolution=RESOLUTION, shard_size=1, seed=SEED)
    crops: dict[str, list[tuple[int, bytes]]] = {split: [] for split in PER_CLASS}
    index = 0
    while any(wanted.values()):
        sample = crop_sample(spec, index)
        name = json.loads(sample["json"])["photo"]
        split = next((s for s in PER_CLASS if wanted.get((s, name))), None)
        if split is not None:
            crops[split].append((CLASSES.index(name), sample["jpg"]))
            wanted[split, name] -= 1
        index += 1
    return crops


def write_folders(crops: dict[str, list[tuple[int, bytes]]], out: Path) -> None:
    for split in FOLDER_SPLITS:
        for position, (label, jpg) in enumerate(crops[split]):
            target = out / split / CLASSES[label] / f"{position:04d}.jpg"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(jpg)


def write_medmnist(crops: dict[str, list[tuple[int, bytes]]], path: Path) -> None:
    """MedMNIST's layout: <split>_images (n, 28, 28, 3) uint8, <split>_labels (n, 1)."""
    arrays = {}
    for split, samples in crops.items():
        images = [
            np.asarray(Image.open(io.BytesIO(jpg)).convert("RGB").resize((MEDMNIST_RESOLUTION,) * 2))
            for _, jpg in samples
        ]
        arrays[f"{split}_images"] = np.stack(images).astype(np.uint8)
        arrays[f"{split}_labels"] = np.array([[label] for label, _ in samples], dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else FOLDER)
    crops = labelled_crops()
    write_folders(crops, folder)
    write_medmnist(crops, folder / "medmnist.npz")
    print(f"{folder}: " + ", ".join(f"{split} {len(samples)} images" for split, samples in crops.items()))
