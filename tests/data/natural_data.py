"""A small natural-image dataset (LAION-format crops) for the data tests; a helper module,
not a conftest, for the reason given in shard_data.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpvip.data.natural import NaturalSpec, write_natural_dataset

NATURAL = NaturalSpec(images=25, resolution=32, shard_size=10, seed=3)  # shards of 10, 10 and 5


@pytest.fixture(scope="session")
def natural_index(tmp_path_factory) -> Path:
    """index.json of NATURAL, with its shards, member tables and dataset.json (built once)."""
    out = tmp_path_factory.getbasetemp() / "natural-25-32"
    if not (out / "index.json").exists():
        write_natural_dataset(NATURAL, out, progress=False)
    return out / "index.json"
