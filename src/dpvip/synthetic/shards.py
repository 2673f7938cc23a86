"""Synthetic datasets as webdataset tar shards, plus an index of what each shard holds.

A shard holds images `shard * shard_size ...` of its dataset, one sample per image:
`<index>.png` (or `.jpg`) and `<index>.json` (dataset, family, index, seed, and what the
family records: program and time, network). Shards are written to a temporary file and
renamed, so a crash never leaves a half shard under the final name; tar headers carry a
fixed mtime, so the same shard has the same bytes on every run.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from tqdm import tqdm

from dpvip.errors import DpvipInputError
from dpvip.files import atomic_target, sha256, writable_target, write_json
from dpvip.synthetic.spec import DatasetSpec

KEY_DIGITS = 9


def sample_key(index: int) -> str:
    return f"{index:0{KEY_DIGITS}d}"


def shard_stem(shard: int) -> str:
    return f"shard-{shard:06d}"


def shard_name(shard: int) -> str:
    return shard_stem(shard) + ".tar"


def write_shard(spec: DatasetSpec, shard: int, path: str | Path, device: str = "cpu", progress: bool = True) -> int:
    """Render shard `shard` of `spec` into `path`; returns the number of samples written."""
    import webdataset as wds

    indices = spec.shard_range(shard)
    path = writable_target(path)
    generator = spec.generator(device)
    shared = {"dataset": spec.name, "family": spec.family, "seed": spec.seed, "resolution": spec.resolution}
    written = 0
    bar = tqdm(
        total=len(indices), desc=f"{spec.name} {shard_name(shard)}", unit="img", disable=not progress, mininterval=2
    )
    with atomic_target(path) as partial, bar, wds.TarWriter(str(partial), mtime=0) as sink:
        for index, image in generator.images(indices.start, indices.stop):
            meta = json.dumps(shared | {"index": index} | generator.metadata(index), sort_keys=True)
            sink.write({"__key__": sample_key(index), spec.encoding: image, "json": meta})
            written += 1
            bar.update()
    return written


def shard_contents(path: str | Path) -> dict:
    """Sample count, first and last index, and SHA-256 of one shard, read from the file."""
    path = Path(path)
    with tarfile.open(path) as archive:
        keys = sorted({Path(member.name).name.split(".", 1)[0] for member in archive.getmembers()})
    return {
        "file": path.name,
        "samples": len(keys),
        "first_index": int(keys[0]) if keys else None,
        "last_index": int(keys[-1]) if keys else None,
        "sha256": sha256(path),
    }


def build_index(spec: DatasetSpec, shard_paths: list[str | Path]) -> dict:
    """The dataset index: the spec and each shard's contents; refuses shards that do not match."""
    if len(shard_paths) != spec.shards:
        raise DpvipInputError(f"dataset '{spec.name}' has {spec.shards} shards; {len(shard_paths)} were given to index")
    shards = []
    for shard, path in enumerate(shard_paths):
        contents = shard_contents(path)
        expected = spec.shard_range(shard)
        if contents["samples"] != len(expected) or contents["first_index"] != expected.start:
            raise DpvipInputError(
                f"shard {path} holds {contents['samples']} samples from index {contents['first_index']}; "
                f"dataset '{spec.name}' expects {len(expected)} from {expected.start}"
            )
        shards.append(contents)
    return spec.describe() | {"shards": shards, "total_samples": sum(s["samples"] for s in shards)}


def claim_folder(spec: DatasetSpec, folder: str | Path) -> None:
    """Record `spec` in `folder/dataset.json`, refusing a folder that holds another dataset:
    resuming must never mix shards generated with different settings."""
    record = writable_target(Path(folder) / "dataset.json")
    if record.exists():
        if json.loads(record.read_text()) != spec.describe():
            raise DpvipInputError(
                f"{folder} holds a dataset generated with other settings ({record}); use another output folder"
            )
        return
    write_json(spec.describe(), record)


def read_images(path: str | Path, limit: int | None = None) -> Iterator[tuple[np.ndarray, dict]]:
    """(H, W, 3) uint8 image and its metadata for each sample of a shard, in order."""
    import webdataset as wds

    dataset = wds.WebDataset(str(path), shardshuffle=False).decode("rgb8")
    for count, sample in enumerate(dataset):
        if limit is not None and count >= limit:
            return
        image = sample.get("png", sample.get("jpg"))
        yield image, sample["json"]
