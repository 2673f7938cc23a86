"""Random access into webdataset shards: the same samples as webdataset's sequential reading,
global indices across shard boundaries, one-line errors naming the bad shard, and copies for
DataLoader workers that read the same samples."""

from __future__ import annotations

import json
import os
import pickle
import shutil

import pytest
import webdataset as wds
from torch.utils.data import DataLoader

from dpvip.data.shard_reader import ShardReader
from dpvip.errors import DpvipInputError
from shard_data import IMAGES, shard_paths, small_index, write_index  # noqa: F401  (fixture)


def test_global_indices_read_what_webdataset_reads_in_order(small_index):
    reader = ShardReader.from_index(small_index)
    assert len(reader) == IMAGES == json.loads(small_index.read_text())["total_samples"]
    sequential = list(wds.WebDataset([str(p) for p in shard_paths(small_index)], shardshuffle=False))
    assert len(sequential) == IMAGES
    for index, expected in enumerate(sequential):
        sample = reader[index]
        assert sample["__key__"] == expected["__key__"] == f"{index:09d}"
        assert set(sample) == {"__key__", "png", "json"}
        assert sample["png"] == expected["png"] and sample["json"] == expected["json"]
    # Random access does not depend on the order of reads (here backwards, across shards).
    backwards = ShardReader.from_index(small_index)
    for index in reversed(range(IMAGES)):
        assert backwards[index]["png"] == sequential[index]["png"]


@pytest.mark.parametrize(
    "index, place",
    [(0, (0, 0)), (9, (0, 9)), (10, (1, 0)), (19, (1, 9)), (20, (2, 0)), (24, (2, 4))],
)
def test_locate_maps_a_global_index_to_shard_and_position(small_index, index, place):
    assert ShardReader.from_index(small_index).locate(index) == place


@pytest.mark.parametrize("index", [-1, IMAGES, IMAGES + 10])
def test_indices_outside_the_dataset_raise_index_error(small_index, index):
    reader = ShardReader.from_index(small_index)
    with pytest.raises(IndexError, match=f"sample {index} is outside 0..{IMAGES - 1}"):
        reader[index]
    with pytest.raises(IndexError):
        reader.locate(index)


def test_a_missing_index_is_named(tmp_path):
    with pytest.raises(DpvipInputError, match=f"dataset index {tmp_path / 'index.json'} does not exist"):
        ShardReader.from_index(tmp_path / "index.json")


def test_a_missing_shard_is_named(small_index, tmp_path):
    paths = shard_paths(small_index)
    for path in (paths[0], paths[2]):
        shutil.copyfile(path, tmp_path / path.name)
    write_index(tmp_path, [(p.name, n) for p, n in zip(paths, (10, 10, 5))])
    with pytest.raises(DpvipInputError) as caught:
        ShardReader.from_index(tmp_path / "index.json")
    message = str(caught.value)
    assert message == f"shard {tmp_path / paths[1].name} is missing (1 of 3 shards missing)"


def test_a_shard_holding_another_count_than_its_index_says_is_refused_in_one_line(small_index, tmp_path):
    paths = shard_paths(small_index)
    for path in paths:
        shutil.copyfile(path, tmp_path / path.name)
    write_index(tmp_path, [(paths[0].name, 10), (paths[1].name, 12), (paths[2].name, 5)])
    reader = ShardReader.from_index(tmp_path / "index.json")
    assert reader[3]["__key__"] == "000000003"  # the shards that agree stay readable
    with pytest.raises(DpvipInputError) as caught:
        reader[11]
    assert str(caught.value) == f"shard {tmp_path / paths[1].name} holds 10 samples; its index says 12"


def _broken_shard(small_index, tmp_path, how: str):
    data = shard_paths(small_index)[0].read_bytes()
    broken = {
        "garbage": os.urandom(4096),
        "text": b"not a tar file\n" * 200,
        "cut_in_header": data[:300],
        "empty": b"",
    }[how]
    (tmp_path / "broken.tar").write_bytes(broken)
    return ShardReader.from_index(write_index(tmp_path, [("broken.tar", 10)]))


@pytest.mark.parametrize("how", ["garbage", "cut_in_header"])
def test_a_shard_that_is_not_a_tar_file_is_refused_in_one_line(small_index, tmp_path, how):
    reader = _broken_shard(small_index, tmp_path, how)
    with pytest.raises(DpvipInputError) as caught:
        reader[0]
    message = str(caught.value)
    assert message.startswith(f"shard {tmp_path / 'broken.tar'} cannot be read as a tar file")
    assert "\n" not in message, f"the error spans {len(message.splitlines())} lines:\n{message}"
    assert not message.endswith(":")  # the reason is there, not only tarfile's "could not be opened:"
    if how == "garbage":
        assert message.endswith("method tar: ReadError('invalid header')"), message


def test_a_shard_cut_in_the_middle_is_refused_by_name(small_index, tmp_path):
    data = shard_paths(small_index)[0].read_bytes()
    (tmp_path / "cut.tar").write_bytes(data[: len(data) // 2])
    reader = ShardReader.from_index(write_index(tmp_path, [("cut.tar", 10)]))
    with pytest.raises(DpvipInputError) as caught:
        reader[0]
    assert str(tmp_path / "cut.tar") in str(caught.value) and "\n" not in str(caught.value)


def test_a_pickled_copy_reads_the_same_samples(small_index):
    reader = ShardReader.from_index(small_index)
    before = [reader[i] for i in range(IMAGES)]  # tables built, file handles open
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._handles == {} and copy._tables == {}  # per-process state is not carried
    assert len(copy) == IMAGES
    assert [copy[i] for i in range(IMAGES)] == before


def test_forked_dataloader_workers_read_the_same_samples(small_index):
    reader = ShardReader.from_index(small_index)
    expected = [reader[i] for i in range(IMAGES)]  # the parent's handles exist before the fork
    loader = DataLoader(reader, batch_size=None, num_workers=2, collate_fn=lambda sample: sample)
    assert list(loader) == expected
