"""Content digests of the user's data, the params that rerun a job when a configured folder
or file changes inside, not only when its path does."""

from __future__ import annotations

import os

import pytest

from dpvip.plan import data_digest
from dpvip.plan.data_digest import content_digest, spec_digests


@pytest.fixture(autouse=True)
def fresh_digests():
    content_digest.cache_clear()  # once per Snakemake process; each check here is a new "process"
    yield
    content_digest.cache_clear()


def tree(root, classes=("astronaut", "chelsea", "coffee")):
    for name in classes:
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "a.png").write_bytes(name.encode())
    return root


def digest(path) -> str:
    content_digest.cache_clear()
    return content_digest(str(path))


def test_a_folder_changes_its_digest_when_a_class_goes_an_image_is_rewritten_or_added(tmp_path):
    root = tree(tmp_path / "train")
    first = digest(root)
    assert first.startswith("sha256:") and digest(root) == first  # unchanged: the same
    (root / "chelsea" / "a.png").unlink()
    (root / "chelsea").rmdir()
    removed = digest(root)
    assert removed != first
    image = root / "coffee" / "a.png"
    stat = image.stat()
    image.write_bytes(b"other")  # same name, new bytes
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert digest(root) not in (first, removed)


def test_a_shard_index_stands_for_its_folder_and_a_missing_path_says_so(tmp_path):
    (tmp_path / "index.json").write_text("{}")
    before = digest(tmp_path / "index.json")
    (tmp_path / "shard-000000.tar").write_bytes(b"x")
    assert digest(tmp_path / "index.json") != before
    assert digest(tmp_path / "nowhere") == "missing"


def test_a_folder_above_the_stat_limit_is_digested_by_names_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(data_digest, "STAT_LIMIT", 2)
    root = tree(tmp_path / "big")
    assert digest(root).startswith("names-only:")


def test_a_spec_digests_its_paths_only():
    assert spec_digests({"source": "photo_crops", "seed": 0}) == {}
    assert spec_digests(None) == {}
    assert set(spec_digests({"source": "image_folder", "train": "/nowhere/a", "test": "/nowhere/b"})) == {
        "train",
        "test",
    }
