"""Small shader shards for the data tests (a helper module, not a conftest: a second
conftest.py would replace the `conftest` module that tests import `run_dpvip` from)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpvip.files import write_json
from dpvip.synthetic.shards import build_index, shard_name, write_shard
from dpvip.synthetic.spec import DatasetSpec

IMAGES, SHARD_SIZE, RESOLUTION = 25, 10, 32  # shards of 10, 10 and 5


@pytest.fixture(scope="session")
def small_index(tmp_path_factory) -> Path:
    """index.json of 25 shader images at 32 px in shards of 10, 10 and 5 (built once)."""
    out = tmp_path_factory.getbasetemp() / "shaders-25-32"
    if not (out / "index.json").exists():
        spec = DatasetSpec.from_config(
            "shaders",
            {
                "family": "shaders",
                "images": IMAGES,
                "resolution": RESOLUTION,
                "shard_size": SHARD_SIZE,
                "options": {"programs": 8},
            },
        )
        paths = [out / shard_name(shard) for shard in range(spec.shards)]
        for shard, path in enumerate(paths):
            write_shard(spec, shard, path, progress=False)
        write_json(build_index(spec, paths), out / "index.json")
    return out / "index.json"


def shard_paths(index_path: Path) -> list[Path]:
    return [index_path.parent / entry["file"] for entry in json.loads(index_path.read_text())["shards"]]


def write_index(folder: Path, shards: list[tuple[str, int]]) -> Path:
    """An index.json in the form the reader expects: {"shards": [{"file", "samples"}]}."""
    path = folder / "index.json"
    path.write_text(json.dumps({"shards": [{"file": name, "samples": count} for name, count in shards]}))
    return path
