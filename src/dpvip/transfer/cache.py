"""Features of a frozen network, computed once and stored as sharded arrays that every later
DP run (each epsilon, seed, learning rate) reads instead of running the network again.

Layout of a cache folder: `train_v<view>_<k>.npy` (rows k * shard_size ... of view `view`),
`test_<k>.npy` (the centre-cropped test split, one view), `train_labels.npy`,
`test_labels.npy`, and `meta.json`, written last, whose presence marks a complete cache.

Shards are computed into the sibling work folder `<out_dir>.partial/`, each written
atomically, beside the `fingerprint.json` of what they are features of. A crashed run
resumes from the shards already there if the fingerprint is unchanged (otherwise the folder is
emptied); the complete work folder then replaces `out_dir` in one rename.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from dpvip.errors import DpvipInputError
from dpvip.files import atomic_target, sha256, write_json

log = logging.getLogger(__name__)

DTYPES = ("float32", "float16")
META, FINGERPRINT = "meta.json", "fingerprint.json"
META_KEYS = {"fingerprint", "train", "test", "views", "shard_size", "dtype", "width", "classes", "files"}

Augment = Callable[[torch.Tensor, int, torch.Tensor], torch.Tensor]


@dataclass
class CachedFeatures:
    train: torch.Tensor  # (views, n_train, width) float32
    train_labels: torch.Tensor  # (n_train,) int64
    test: torch.Tensor  # (n_test, width) float32, centre crops
    test_labels: torch.Tensor
    classes: int
    meta: dict


@dataclass(frozen=True)
class _Shard:
    name: str
    split: str  # "train" or "test"
    view: int | None  # None for the test split, which is never augmented
    start: int
    stop: int


def shard_name(split: str, k: int, view: int | None = None) -> str:
    return f"{split}_{k:05d}.npy" if view is None else f"{split}_v{view}_{k:05d}.npy"


def _shards(n_train: int, n_test: int, views: int, shard_size: int) -> list[_Shard]:
    def rows(n: int) -> list[tuple[int, int, int]]:
        return [(k, k * shard_size, min(n, (k + 1) * shard_size)) for k in range(math.ceil(n / shard_size))]

    train = [
        _Shard(shard_name("train", k, v), "train", v, start, stop)
        for v in range(views)
        for k, start, stop in rows(n_train)
    ]
    return train + [_Shard(shard_name("test", k), "test", None, start, stop) for k, start, stop in rows(n_test)]


def _identity(fingerprint: dict, n_train: int, n_test: int, views: int, shard_size: int, dtype: str) -> dict:
    """What the arrays are features of and how they are laid out, as it reads back from JSON
    (so tuples compare equal to the lists they become)."""
    record = {
        "fingerprint": fingerprint,
        "train": n_train,
        "test": n_test,
        "views": views,
        "shard_size": shard_size,
        "dtype": dtype,
    }
    return json.loads(json.dumps(record))


def _read_json(path: Path) -> dict | None:
    """The JSON object in `path`, or None when it is absent or unreadable."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _save_array(array: np.ndarray, path: Path) -> None:
    with atomic_target(path) as partial, partial.open("wb") as handle:  # np.save(path) would append .npy
        np.save(handle, array)


def _batches(data, start: int, stop: int, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(images, dataset indices) of rows start..stop; through `subset`, so an on-disk
    FolderImages is decoded one batch at a time as well."""
    for first in range(start, stop, batch_size):
        indices = torch.arange(first, min(stop, first + batch_size))
        yield data.subset(indices).images, indices


@torch.no_grad()
def _compute(
    shard: _Shard,
    data,
    extractor: Callable[[torch.Tensor], torch.Tensor],
    augment: Augment | None,
    batch_size: int,
    dtype: str,
) -> np.ndarray:
    parts = []
    for images, indices in _batches(data, shard.start, shard.stop, batch_size):
        if shard.view is not None and augment is not None:
            images = augment(images, shard.view, indices)
        features = extractor(images)
        if features.ndim != 2 or len(features) != len(indices):
            raise DpvipInputError(
                f"the feature extractor gave {tuple(features.shape)} for {len(indices)} images, not (images, width)"
            )
        parts.append(features.float().cpu().numpy().astype(dtype))
    return np.concatenate(parts)


def _check_arguments(
    train, test, views: int, augment: Augment | None, batch_size: int, shard_size: int, dtype: str
) -> None:
    for name, value in (("views", views), ("batch_size", batch_size), ("shard_size", shard_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DpvipInputError(f"feature cache {name} {value!r} must be a positive integer")
    if dtype not in DTYPES:
        raise DpvipInputError(f"feature cache dtype '{dtype}' is not one of {', '.join(DTYPES)}")
    if views > 1 and augment is None:
        raise DpvipInputError(f"{views} feature views need an augmentation (without one they are all the same)")
    for split, data in (("train", train), ("test", test)):
        if len(data) == 0:
            raise DpvipInputError(f"the {split} split of {data.name} holds no images")


def _prepare_work(work: Path, identity: dict) -> None:
    """`work` holding only shards of `identity`: those of an interrupted run, or none."""
    if _read_json(work / FINGERPRINT) != identity:
        if work.exists():
            log.info("emptying the feature work folder %s: its shards are of another fingerprint", work)
            shutil.rmtree(work)
        work.mkdir(parents=True)
        write_json(identity, work / FINGERPRINT)
    for stray in work.glob("*.partial"):  # a temporary file of a run killed mid-write
        stray.unlink()


def _width(folder: Path, shards: list[_Shard]) -> int:
    widths = {np.load(folder / shard.name, mmap_mode="r").shape[1] for shard in shards}
    if len(widths) != 1:
        raise DpvipInputError(f"feature shards in {folder} have different widths {sorted(widths)}")
    return widths.pop()


def _publish(work: Path, out_dir: Path) -> None:
    """Replace `out_dir` (absent, an empty folder made by a workflow, or an older cache) by `work`."""
    if out_dir.is_dir():
        shutil.rmtree(out_dir)
    elif out_dir.exists():
        out_dir.unlink()
    os.replace(work, out_dir)
    (out_dir / FINGERPRINT).unlink(missing_ok=True)


def cache_features(
    extractor: Callable[[torch.Tensor], torch.Tensor],
    train,
    test,
    out_dir: str | Path,
    *,
    fingerprint: dict,
    views: int = 1,
    augment: Augment | None = None,
    batch_size: int = 256,
    shard_size: int = 4096,
    dtype: str = "float32",
    progress: bool = True,
) -> dict:
    """Features of `train` (`views` views, each `augment(images, view, indices)`, or the images
    as they are) and of `test` (as they are) in `out_dir`; returns the cache's meta.

    `fingerprint` names what the features are of (network, recipe, data, crops, seed); a
    complete cache of the same fingerprint and layout is returned without running anything.
    """
    _check_arguments(train, test, views, augment, batch_size, shard_size, dtype)
    out_dir = Path(out_dir)
    identity = _identity(fingerprint, len(train), len(test), views, shard_size, dtype)
    meta = _read_json(out_dir / META)
    if meta is not None and {key: meta.get(key) for key in identity} == identity:
        try:
            _check_files(out_dir, meta)
            return meta
        except DpvipInputError as err:
            log.info("recomputing the feature cache %s: %s", out_dir, err)
    elif meta is not None:
        log.info("the feature cache %s is of another fingerprint; it will be replaced", out_dir)
    work = out_dir.with_name(out_dir.name + ".partial")
    _prepare_work(work, identity)

    shards = _shards(len(train), len(test), views, shard_size)
    missing = [shard for shard in shards if not (work / shard.name).is_file()]
    with tqdm(
        total=len(shards),
        initial=len(shards) - len(missing),
        desc=f"features {out_dir.name}",
        unit="shard",
        disable=not progress,
    ) as bar:
        for shard in missing:
            data = train if shard.split == "train" else test
            _save_array(_compute(shard, data, extractor, augment, batch_size, dtype), work / shard.name)
            bar.update()
    for split, data in (("train", train), ("test", test)):
        _save_array(np.asarray(data.labels, dtype=np.int64), work / f"{split}_labels.npy")

    names = [shard.name for shard in shards] + ["train_labels.npy", "test_labels.npy"]
    files = {name: {"bytes": (work / name).stat().st_size, "sha256": sha256(work / name)} for name in names}
    meta = identity | {"width": _width(work, shards), "classes": int(train.classes), "files": files}
    write_json(meta, work / META)  # last: the cache is complete
    _publish(work, out_dir)
    return meta


def _differs(folder: Path, name: str) -> DpvipInputError:
    return DpvipInputError(f"feature cache {folder}: {name} differs from the one recorded in {META}")


def _check_files(folder: Path, meta: dict) -> None:
    """Every file `meta` lists is in `folder` with its recorded size (a stat per file)."""
    for name, record in meta["files"].items():
        path = folder / name
        if not path.is_file():
            raise DpvipInputError(f"feature cache {folder} lacks {name}")
        if path.stat().st_size != record["bytes"]:
            raise _differs(folder, name)


def _load_array(folder: Path, name: str, record: dict) -> np.ndarray:
    """The array in `name`, read once and hashed from the same bytes: loading reads every byte
    anyway, so checking the SHA-256 costs little and catches a shard corrupted or swapped
    in place at its size, which the size check cannot."""
    data = (folder / name).read_bytes()
    if hashlib.sha256(data).hexdigest() != record["sha256"]:
        raise _differs(folder, name)
    return np.load(io.BytesIO(data))


def load_cache(out_dir: str | Path) -> CachedFeatures:
    """The features of a complete cache, as float32 tensors (float16 shards are widened)."""
    folder = Path(out_dir)
    meta = _read_json(folder / META)
    if meta is None or not META_KEYS <= meta.keys():
        raise DpvipInputError(f"{folder} is not a complete feature cache (no readable {META})")
    _check_files(folder, meta)  # fail fast on a missing or truncated file
    views, width, shard_size = meta["views"], meta["width"], meta["shard_size"]
    train = np.empty((views, meta["train"], width), np.float32)
    test = np.empty((meta["test"], width), np.float32)
    for shard in _shards(meta["train"], meta["test"], views, shard_size):
        rows = _load_array(folder, shard.name, meta["files"][shard.name])
        target = train[shard.view] if shard.split == "train" else test
        if rows.shape != (shard.stop - shard.start, width):
            raise DpvipInputError(
                f"feature cache {folder}: {shard.name} has shape {rows.shape}, not {(shard.stop - shard.start, width)}"
            )
        target[shard.start : shard.stop] = rows
    labels = {
        split: torch.from_numpy(_load_array(folder, f"{split}_labels.npy", meta["files"][f"{split}_labels.npy"]))
        for split in ("train", "test")
    }
    return CachedFeatures(
        torch.from_numpy(train), labels["train"], torch.from_numpy(test), labels["test"], meta["classes"], meta
    )
