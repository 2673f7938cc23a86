"""Shards and their index: counts match the spec and the files, mismatched shards are refused
by name, and writing is atomic (no '.partial' left, no half shard under the final name)."""

import hashlib
import json
import shutil
import tarfile

import numpy as np
import pytest

from dpvip.errors import DpvipInputError
from dpvip.synthetic.dead_leaves import DeadLeavesFamily
from dpvip.files import write_json
from dpvip.synthetic.shards import build_index, read_images, sample_key, shard_name, write_shard
from dpvip.synthetic.spec import DatasetSpec


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """23 dead-leaves images at 16 px in shards of 10: 10, 10, 3."""
    out = tmp_path_factory.mktemp("dataset")
    spec = DatasetSpec.from_config(
        "leaves", {"family": "dead_leaves", "images": 23, "resolution": 16, "shard_size": 10, "seed": 4}
    )
    paths = [out / shard_name(s) for s in range(spec.shards)]
    counts = [write_shard(spec, s, path, progress=False) for s, path in enumerate(paths)]
    return spec, paths, counts


def test_index_counts_match_spec_and_files(dataset):
    spec, paths, counts = dataset
    assert counts == [10, 10, 3]
    index = build_index(spec, paths)
    assert index["total_samples"] == spec.images == 23
    assert index["family"] == "dead_leaves" and index["seed"] == 4
    for shard, (entry, path) in enumerate(zip(index["shards"], paths)):
        expected = spec.shard_range(shard)
        assert entry["file"] == path.name
        assert entry["samples"] == len(expected)
        assert (entry["first_index"], entry["last_index"]) == (expected.start, expected.stop - 1)
        assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        with tarfile.open(path) as archive:
            names = archive.getnames()
        assert sorted(names) == sorted(f"{sample_key(i)}.{ext}" for i in expected for ext in ("png", "json"))


def test_shard_samples_carry_image_and_metadata(dataset):
    spec, paths, _ = dataset
    samples = list(read_images(paths[1]))
    assert [meta["index"] for _, meta in samples] == list(range(10, 20))
    family = DeadLeavesFamily(16, seed=4)
    for image, meta in samples[:3]:
        assert meta == {
            "dataset": "leaves",
            "family": "dead_leaves",
            "index": meta["index"],
            "seed": 4,
            "resolution": 16,
        }
        assert np.array_equal(image, family.render_one(meta["index"]))


def test_index_refuses_a_shard_with_the_wrong_samples(dataset, tmp_path):
    spec, paths, _ = dataset
    # Shard 0's file under shard 2's name: 10 samples from index 0 where 3 from 20 are expected.
    wrong = tmp_path / shard_name(2)
    shutil.copy(paths[0], wrong)
    with pytest.raises(DpvipInputError) as caught:
        build_index(spec, [paths[0], paths[1], wrong])
    assert str(wrong) in str(caught.value)
    assert "expects 3 from 20" in str(caught.value)


def test_index_refuses_a_shard_with_the_right_count_from_the_wrong_place(dataset, tmp_path):
    spec, paths, _ = dataset
    wrong = tmp_path / shard_name(1)
    shutil.copy(paths[0], wrong)  # 10 samples, as shard 1 should have, but from index 0
    with pytest.raises(DpvipInputError, match=str(wrong)):
        build_index(spec, [paths[0], wrong, paths[2]])


def test_index_refuses_a_missing_shard(dataset):
    spec, paths, _ = dataset
    with pytest.raises(DpvipInputError, match="has 3 shards; 2 were given"):
        build_index(spec, paths[:2])


def test_write_index_round_trips(dataset, tmp_path):
    spec, paths, _ = dataset
    index = build_index(spec, paths)
    target = tmp_path / "sub" / "index.json"
    write_json(index, target)
    assert json.loads(target.read_text()) == index
    assert not target.with_name("index.json.partial").exists()


def test_successful_write_leaves_no_partial_file(tmp_path):
    spec = DatasetSpec.from_config("d", {"family": "dead_leaves", "images": 5, "resolution": 16, "shard_size": 5})
    path = tmp_path / "out" / shard_name(0)
    assert write_shard(spec, 0, path, progress=False) == 5
    assert sorted(p.name for p in path.parent.iterdir()) == [shard_name(0)]


def test_failed_write_leaves_neither_final_nor_partial_file(tmp_path, monkeypatch):
    spec = DatasetSpec.from_config("d", {"family": "dead_leaves", "images": 8, "resolution": 16, "shard_size": 8})
    original = DeadLeavesFamily.render_block
    rendered = []

    def failing(self, start, count):
        if start >= 4:  # midway: samples 0..3 are already in the partial tar
            assert (tmp_path / "out" / (shard_name(0) + ".partial")).exists()
            raise RuntimeError("renderer crashed")
        rendered.append(start)
        return original(self, start, count)

    monkeypatch.setattr(DeadLeavesFamily, "render_block", failing)
    path = tmp_path / "out" / shard_name(0)
    with pytest.raises(RuntimeError, match="renderer crashed"):
        write_shard(spec, 0, path, progress=False)
    assert rendered == [0, 1, 2, 3]
    assert list(path.parent.iterdir()) == []


def test_writing_to_a_path_under_a_file_is_named(tmp_path):
    spec = DatasetSpec.from_config("d", {"family": "dead_leaves", "images": 2, "resolution": 8, "shard_size": 2})
    (tmp_path / "afile").write_text("not a folder")
    target = tmp_path / "afile" / "sub" / shard_name(0)
    with pytest.raises(DpvipInputError, match="afile"):
        write_shard(spec, 0, target, progress=False)


def test_jpg_encoding_writes_readable_lossy_images(tmp_path):
    spec = DatasetSpec.from_config(
        "d", {"family": "dead_leaves", "images": 3, "resolution": 32, "shard_size": 3, "encoding": "jpg"}
    )
    path = tmp_path / shard_name(0)
    write_shard(spec, 0, path, progress=False)
    with tarfile.open(path) as archive:
        assert sorted(archive.getnames()) == [f"{sample_key(i)}.{ext}" for i in range(3) for ext in ("jpg", "json")]
    family = DeadLeavesFamily(32, seed=0)
    for image, meta in read_images(path):
        assert image.shape == (32, 32, 3)
        # JPEG at 32 px with hard shape edges is far from exact (measured: 20..31 mean grey
        # levels off, as PIL's own quality-90 JPEG), but much closer than any other image.
        error = np.abs(image.astype(int) - family.render_one(meta["index"]).astype(int)).mean()
        other = np.abs(image.astype(int) - family.render_one(meta["index"] + 3).astype(int)).mean()
        assert error < 40 and error < 0.6 * other, (error, other)
