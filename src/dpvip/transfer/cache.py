"""Features of a frozen network, computed once and stored as sharded arrays that every later
DP run (each epsilon, seed, learning rate) reads instead of running the network again.

Layout of a cache folder: `train_v<view>_<k>.npy` (rows k * shard_size ... of view `view`),
`test_<k>.npy` (the centre-cropped test split, one view), `train_labels.npy`,
`test_labels.npy`, and `meta.json`, written last, whose presence marks a complete cache.

Every shard is a plain .npy array (float16 at paper scale), written batch by batch through a
numpy memory map (`np.lib.format.open_memmap`) and read the same way (`open_cache`: rows
widened to float32 a micro-batch at a time, `dpvip.transfer.rows`), so neither writing nor
reading a cache holds more of it in memory than a batch: the DP-RandP ImageNet probe's
blocks4 cache is 94 GB. `load_cache` reads a small cache whole, as float32 tensors.

Shards are computed into the sibling work folder `<out_dir>.partial/`, each written
atomically, beside the `fingerprint.json` of what they are features of. A crashed run
resumes from the shards already there if the fingerprint is unchanged (otherwise the folder is
emptied); the complete work folder then replaces `out_dir` in one rename.
"""

from __future__ import annotations

import hashlib
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
from dpvip.transfer.rows import ShardedRows

log = logging.getLogger(__name__)

DTYPES = ("float32", "float16")
META, FINGERPRINT = "meta.json", "fingerprint.json"
META_KEYS = {"fingerprint", "train", "test", "views", "shard_size", "dtype", "width", "classes", "files"}

Augment = Callable[[torch.Tensor, int, torch.Tensor], torch.Tensor]


@dataclass
class FeatureCache:
    """A complete cache, memory-mapped (`open_cache`)."""

    train: list[ShardedRows]  # one per view, (n_train, width) each
    train_labels: torch.Tensor  # (n_train,) int64
    test: ShardedRows  # (n_test, width), centre crops
    test_labels: torch.Tensor
    classes: int
    meta: dict


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
def _write_shard(
    shard: _Shard,
    data,
    extractor: Callable[[torch.Tensor], torch.Tensor],
    augment: Augment | None,
    batch_size: int,
    dtype: str,
    path: Path,
) -> None:
    """The shard's features, written batch by batch into a memory-mapped .npy file (beside
    `path`, renamed onto it when whole). Each batch maps the file anew and closes it, so the
    written pages leave the process's resident set with the batch."""
    with atomic_target(path) as partial:
        done = 0
        for images, indices in _batches(data, shard.start, shard.stop, batch_size):
            if shard.view is not None and augment is not None:
                images = augment(images, shard.view, indices)
            features = extractor(images)
            if features.ndim != 2 or len(features) != len(indices):
                raise DpvipInputError(
                    f"the feature extractor gave {tuple(features.shape)} for {len(indices)} images, not (images, width)"
                )
            rows = features.float().cpu().numpy().astype(dtype)
            if done == 0:
                shape = (shard.stop - shard.start, rows.shape[1])
                target = np.lib.format.open_memmap(partial, mode="w+", dtype=dtype, shape=shape)
            else:
                target = np.lib.format.open_memmap(partial, mode="r+")
            if rows.shape[1] != target.shape[1]:
                raise DpvipInputError(
                    f"the feature extractor gave width {rows.shape[1]} after {target.shape[1]} in one shard"
                )
            target[done : done + len(rows)] = rows
            target.flush()
            del target
            done += len(rows)


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
            _write_shard(shard, data, extractor, augment, batch_size, dtype, work / shard.name)
            bar.update()
    for split, data in (("train", train), ("test", test)):
        _save_array(np.asarray(data.labels, dtype=np.int64), work / f"{split}_labels.npy")

    names = [shard.name for shard in shards] + ["train_labels.npy", "test_labels.npy"]
    files = {name: {"bytes": (work / name).stat().st_size, "sha256": sha256(work / name)} for name in names}
    meta = (
        identity
        | {
            "width": _width(work, shards),
            "classes": int(train.classes),
            "test_set": str(getattr(test, "name", "test")),  # names the test images for paired comparisons
            "files": files,
        }
        | _classes_tested(train, test)
    )
    write_json(meta, work / META)  # last: the cache is complete
    _publish(work, out_dir)
    return meta


def _classes_tested(train, test) -> dict:
    """Where the test split lacks some of the classes (a user's image folder): how many it
    holds and which it lacks, so the tables put chance over the classes tested."""
    tested = {int(label) for label in np.asarray(test.labels)}
    if len(tested) >= int(train.classes):
        return {}
    names = getattr(train, "class_names", None) or [str(i) for i in range(int(train.classes))]
    return {
        "classes_tested": len(tested),
        "classes_missing_from_test": [name for i, name in enumerate(names) if i not in tested],
    }


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


def cache_meta(folder: str | Path) -> dict:
    """The meta.json of a complete cache."""
    meta = _read_json(Path(folder) / META)
    if meta is None or not META_KEYS <= meta.keys():
        raise DpvipInputError(f"{folder} is not a complete feature cache (no readable {META})")
    return meta


def cache_digest(meta: dict) -> str:
    """A short name for the exact bytes of a cache: the hash of its files' hashes."""
    return hashlib.sha256(json.dumps(meta["files"], sort_keys=True).encode()).hexdigest()[:16]


def _rows(folder: Path, meta: dict, shards: list[_Shard]) -> ShardedRows:
    """The shards' rows as one memory-mapped array, after checking each shard's header."""
    width = meta["width"]
    for shard in shards:
        header = np.load(folder / shard.name, mmap_mode="r")  # reads the header, maps nothing yet
        expected = (shard.stop - shard.start, width)
        if header.shape != expected or header.dtype != np.dtype(meta["dtype"]):
            raise DpvipInputError(
                f"feature cache {folder}: {shard.name} holds {header.dtype} {header.shape}, "
                f"not {meta['dtype']} {expected}"
            )
        del header
    bounds = [shards[0].start] + [shard.stop for shard in shards]
    return ShardedRows([folder / shard.name for shard in shards], bounds, width, meta["dtype"])


def open_cache(out_dir: str | Path, verify: bool = True) -> FeatureCache:
    """A complete cache, memory-mapped: its rows are read a micro-batch at a time, widened to
    float32 per batch (`dpvip.transfer.rows`); only the labels are loaded. `verify` hashes
    every file against meta.json first (streamed, 1 MiB at a time), which catches a shard
    corrupted or swapped in place at its size: a cost of one read of the cache, once per job."""
    folder = Path(out_dir)
    meta = cache_meta(folder)
    _check_files(folder, meta)  # fail fast on a missing or truncated file
    if verify:
        for name, record in meta["files"].items():
            if sha256(folder / name) != record["sha256"]:
                raise _differs(folder, name)
    shards = _shards(meta["train"], meta["test"], meta["views"], meta["shard_size"])
    train = [_rows(folder, meta, [s for s in shards if s.view == view]) for view in range(meta["views"])]
    test = _rows(folder, meta, [s for s in shards if s.split == "test"])
    labels = {split: torch.from_numpy(np.load(folder / f"{split}_labels.npy")) for split in ("train", "test")}
    return FeatureCache(train, labels["train"], test, labels["test"], meta["classes"], meta)


def load_cache(out_dir: str | Path) -> CachedFeatures:
    """The features of a complete cache as whole float32 tensors (float16 shards are widened):
    for small caches (tests, inspection). Jobs stream a cache with `open_cache` instead."""
    cache = open_cache(out_dir)
    views, (examples, width) = len(cache.train), cache.train[0].shape
    train = torch.empty((views, examples, width), dtype=torch.float32)
    for view, rows in enumerate(cache.train):
        train[view] = rows.read(0, examples)
    test = cache.test.read(0, len(cache.test))
    return CachedFeatures(train, cache.train_labels, test, cache.test_labels, cache.classes, cache.meta)
