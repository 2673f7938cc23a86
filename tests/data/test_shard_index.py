"""Indexing webdataset shards: member tables hold the tar headers' offsets, ShardReader reads
the same samples with them as without, shards may live outside the index's folder, and
img2dataset's stats become the index's failure counts. Missing, changed or miscounted
shards are refused in one line; a corrupt member becomes a CorruptSample."""

from __future__ import annotations

import io
import json
import shutil
import tarfile

import pytest

from dpvip.data.images import AugmentedImages, mae_augmentation
from dpvip.data.shard_index import find_shards, index_shards, summary
from dpvip.data.shard_reader import CorruptSample, ShardReader, load_members, member_table
from dpvip.errors import DpvipInputError
from dpvip.files import sha256
from natural_data import natural_index  # noqa: F401  (fixture)
from shard_data import IMAGES, shard_paths, small_index  # noqa: F401  (fixture)


def _copy_shards(index_path, folder):
    folder.mkdir(parents=True, exist_ok=True)
    return [shutil.copy(path, folder / path.name) for path in shard_paths(index_path)]


def test_member_tables_hold_the_tar_header_offsets(natural_index):
    index = json.loads(natural_index.read_text())
    for entry in index["shards"]:
        shard = natural_index.parent / entry["file"]
        table = load_members(natural_index.parent / entry["members"], shard)
        assert table == member_table(shard)
        with tarfile.open(shard) as archive:
            headers = {member.name: (member.offset_data, member.size) for member in archive}
        assert {f"{key}.{e}": place for key, members in table for e, place in members.items()} == headers
        assert entry["bytes"] == shard.stat().st_size and entry["sha256"] == sha256(shard)


@pytest.mark.parametrize("fixture", ["natural_index", "small_index"])
def test_the_reader_returns_the_same_samples_with_member_tables_as_without(fixture, request, tmp_path):
    original = request.getfixturevalue(fixture)
    shards = _copy_shards(original, tmp_path)
    index_shards(shards, tmp_path / "index.json", dataset="test", source="shards", progress=False)
    with_tables = ShardReader.from_index(tmp_path / "index.json")
    assert all(path is not None for path in with_tables.members)
    scanning = ShardReader(list(zip(shards, with_tables.counts, strict=True)))
    assert len(with_tables) == len(scanning) > 0
    assert [with_tables[i] for i in range(len(scanning))] == [scanning[i] for i in range(len(scanning))]
    assert with_tables.fingerprint == ShardReader.from_index(tmp_path / "index.json").fingerprint


def test_shards_outside_the_index_folder_are_named_by_absolute_path(small_index, tmp_path):
    index = index_shards(
        find_shards(small_index.parent), tmp_path / "elsewhere" / "index.json", "test", "shards", progress=False
    )
    assert [entry["file"] for entry in index["shards"]] == [str(path.resolve()) for path in shard_paths(small_index)]
    assert [entry["members"] for entry in index["shards"]] == [f"members/{n:06d}-shard-{n:06d}.json" for n in range(3)]
    reader = ShardReader.from_index(tmp_path / "elsewhere" / "index.json")
    assert len(reader) == IMAGES and reader[24]["__key__"] == "000000024"


def test_without_checksums_the_index_records_sizes_only(small_index, tmp_path):
    index = index_shards(
        shard_paths(small_index), tmp_path / "index.json", "test", "shards", checksums=False, progress=False
    )
    assert index["checksums"] is False
    assert all("sha256" not in entry and entry["bytes"] > 0 for entry in index["shards"])


def test_img2dataset_stats_become_failure_counts(small_index, tmp_path):
    shards = _copy_shards(small_index, tmp_path)
    stats = [
        {"success": 10, "HTTP Error 404: File not found": 3},
        {
            "success": 10,
            "cannot identify image file <_io.BytesIO object at 0x7f12ab34cd56>": 2,
            "HTTP Error 404: File not found": 1,
        },
    ]
    for shard, status in zip(shards[:2], stats, strict=True):  # shard 2 has no stats: all good
        failed = {"failed_to_download": sum(n for k, n in status.items() if "HTTP" in k)}
        failed["failed_to_resize"] = sum(status.values()) - status["success"] - failed["failed_to_download"]
        record = {"count": sum(status.values()), "successes": status["success"], **failed, "status_dict": status}
        shard.with_name(shard.stem + "_stats.json").write_text(json.dumps(record))
    index = index_shards(shards, tmp_path / "index.json", "test", "img2dataset", progress=False)
    assert index["total_samples"] == 25 and index["attempted"] == 31
    assert index["failures"] == {
        "count": 6,
        "failed_to_download": 4,
        "failed_to_resize": 2,
        "reasons": {"HTTP Error 404: File not found": 4, "cannot identify image file <_io.BytesIO object>": 2},
    }
    assert summary(index) == (
        "25 samples in 3 shards; 6 of 31 failed: HTTP Error 404: File not found (4), "
        "cannot identify image file <_io.BytesIO object> (2)"
    )


def test_a_smaller_index_removes_the_member_tables_it_no_longer_names(small_index, tmp_path):
    shards = _copy_shards(small_index, tmp_path)
    index_shards(shards, tmp_path / "index.json", "test", "shards", progress=False)
    index_shards(shards[:1], tmp_path / "index.json", "test", "shards", progress=False)
    assert sorted(path.name for path in (tmp_path / "members").iterdir()) == ["000000-shard-000000.json"]


def test_missing_shards_and_folders_are_named(small_index, tmp_path):
    with pytest.raises(DpvipInputError, match=f"shard folder {tmp_path / 'none'} does not exist"):
        find_shards(tmp_path / "none")
    with pytest.raises(DpvipInputError, match=f"shard folder {tmp_path} holds no .tar shards"):
        find_shards(tmp_path)
    with pytest.raises(DpvipInputError, match=f"shard {tmp_path / 'a.tar'} does not exist \\(1 of 2 missing\\)"):
        find_shards([shard_paths(small_index)[0], tmp_path / "a.tar"])
    shards = _copy_shards(small_index, tmp_path / "copy")
    index_shards(shards, tmp_path / "index.json", "test", "shards", progress=False)
    shards[1].unlink()
    with pytest.raises(DpvipInputError, match=f"shard {shards[1]} is missing \\(1 of 3 shards missing\\)"):
        ShardReader.from_index(tmp_path / "index.json")


def test_a_missing_member_table_is_named(small_index, tmp_path):
    shards = _copy_shards(small_index, tmp_path)
    index = index_shards(shards, tmp_path / "index.json", "test", "shards", progress=False)
    (tmp_path / index["shards"][2]["members"]).unlink()
    with pytest.raises(DpvipInputError, match="member table .*000002-shard-000002.json is missing"):
        ShardReader.from_index(tmp_path / "index.json")


def test_wrong_counts_are_refused_in_one_line(small_index, tmp_path):
    shards = _copy_shards(small_index, tmp_path)
    with pytest.raises(DpvipInputError) as caught:
        index_shards(shards, tmp_path / "index.json", "test", "shards", expected_samples=[10, 10, 10], progress=False)
    assert str(caught.value) == f"shard {shards[2]} holds 5 samples; dataset 'test' expects 10"
    index_shards(shards, tmp_path / "index.json", "test", "shards", progress=False)
    index = json.loads((tmp_path / "index.json").read_text())
    index["shards"][1]["samples"] = 12
    (tmp_path / "index.json").write_text(json.dumps(index))
    reader = ShardReader.from_index(tmp_path / "index.json")
    with pytest.raises(DpvipInputError) as caught:
        reader[11]
    assert str(caught.value) == f"shard {shards[1]} holds 10 samples; its index says 12"


def test_a_shard_changed_since_it_was_indexed_is_refused(small_index, tmp_path):
    shards = _copy_shards(small_index, tmp_path)
    index_shards(shards, tmp_path / "index.json", "test", "shards", progress=False)
    shutil.copy(shards[0], shards[2])  # another shard under shard 2's name
    reader = ShardReader.from_index(tmp_path / "index.json")
    with pytest.raises(DpvipInputError) as caught:
        reader[20]
    assert str(caught.value).startswith(f"shard {shards[2]} has {shards[0].stat().st_size} bytes; its member table")
    assert str(caught.value).endswith("(index it again)")


def test_a_corrupt_member_is_a_corrupt_sample(natural_index, tmp_path):
    """Sample 1's jpg replaced by text: indexed like any member, skipped and counted in training."""
    source = natural_index.parent / json.loads(natural_index.read_text())["shards"][0]["file"]
    with tarfile.open(source) as original, tarfile.open(tmp_path / "corrupt.tar", "w") as sink:
        for member in original:
            data = original.extractfile(member).read()
            if member.name == "000000001.jpg":
                data = b"not a jpeg" * 10
                member.size = len(data)
            sink.addfile(member, io.BytesIO(data))
    index_shards([tmp_path / "corrupt.tar"], tmp_path / "index.json", "test", "shards", progress=False)
    images = AugmentedImages(ShardReader.from_index(tmp_path / "index.json"), mae_augmentation(16), mask_patches=4)
    assert isinstance(images[(1, 0)], CorruptSample) and "000000001.jpg cannot be decoded" in str(images[(1, 0)])
    assert not isinstance(images[(0, 0)], CorruptSample) and not isinstance(images[(2, 0)], CorruptSample)


def test_an_example_replaced_by_one_of_the_same_size_is_refused_on_read(tmp_path):
    """The attack on the data digest: one example's bytes replaced in place by others of the
    same size, the shard's mtime restored. Its size, member table and index are unchanged, so
    the run's fingerprint (and its noise) would be the old data's; the sample's SHA-256,
    recorded at indexing, refuses it on read."""
    import os

    import webdataset as wds

    from dpvip.data.shard_index import index_shards

    shard = tmp_path / "shard-000000.tar"
    with wds.TarWriter(str(shard)) as sink:
        for i in range(4):
            sink.write({"__key__": f"{i:04d}", "png": bytes([i]) * 64, "cls": str(i % 2).encode()})
    index_shards([shard], tmp_path / "index.json", dataset="test", source="shards", progress=False)
    reader = ShardReader.from_index(tmp_path / "index.json")
    assert reader[2]["png"] == bytes([2]) * 64
    fingerprint, stat = reader.fingerprint, shard.stat()
    (offset, size) = member_table(shard)[2][1]["png"]
    with open(shard, "r+b") as handle:
        handle.seek(offset)
        handle.write(bytes([9]) * size)
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    again = ShardReader.from_index(tmp_path / "index.json")
    assert again.fingerprint == fingerprint and again[1]["png"] == bytes([1]) * 64  # the others still read
    with pytest.raises(DpvipInputError, match="sample 0002 is not the one indexed .* index the shards again"):
        again[2]
