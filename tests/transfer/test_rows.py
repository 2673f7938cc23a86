"""Feature rows read a micro-batch at a time: a cache's memory-mapped shards give, for any
range or set of rows (across shards and map blocks), the rows of the whole array, widened to
float32 (or as stored, for a GPU to widen); in-memory tensors read the same way; a feature
stream yields its micro-batches on demand, prepared, and stops between them when asked."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dpvip.evaluate.datasets import LabelledImages
from dpvip.transfer import rows as rows_module
from dpvip.transfer.cache import cache_features, load_cache, open_cache
from dpvip.train.resume import StepInterrupted
from dpvip.transfer.rows import FeatureStream, SubsetRows, TensorRows

N, WIDTH, SHARD = 23, 5, 7  # 4 train shards: 7, 7, 7, 2 rows


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(rows_module, "READ_BYTES", 3 * WIDTH * 2)  # maps of 3 float16 rows: blocks within shards
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(N, 1, 1, WIDTH, generator=generator)
    split = LabelledImages(images, torch.arange(N) % 3, 3, "rows")
    folder = tmp_path / "cache"
    cache_features(
        lambda x: x.flatten(1) * 3,
        split,
        split,
        folder,
        fingerprint={},
        shard_size=SHARD,
        dtype="float16",
        progress=False,
    )
    return folder, (images.flatten(1) * 3).half().float()  # the features as stored, widened


def test_ranges_and_sets_of_rows_read_as_the_whole_array(cache):
    folder, expected = cache
    whole = load_cache(folder).train[0]
    assert torch.equal(whole, expected)
    opened = open_cache(folder)
    rows = opened.train[0]
    assert rows.shape == (N, WIDTH) and rows.block == 3 and len(rows.paths) == 4
    for start, stop in [(0, N), (5, 16), (6, 7), (14, 23), (20, 40), (9, 9)]:
        assert torch.equal(rows.read(start, stop), whole[start:stop]), (start, stop)
    indices = np.array([0, 3, 6, 7, 8, 13, 14, 20, 21, 22])
    assert torch.equal(rows.take(indices), whole[indices])
    assert torch.equal(rows.take(np.array([22, 1, 22])), whole[[22, 1, 22]])  # any order, repeats
    assert rows.take(np.array([], dtype=np.int64)).shape == (0, WIDTH)
    stored = rows.read(5, 16, widen=False)
    assert stored.dtype == torch.float16 and torch.equal(stored.float(), whole[5:16])
    assert rows.take(indices, widen=False).dtype == torch.float16
    assert rows.read(0, N).dtype == torch.float32


def test_a_subset_of_rows_reads_the_chosen_rows_of_the_cache(cache):
    """The part of a cache a head trains on (or holds out): its ranges and sets are the
    chosen rows of the whole array, in order."""
    folder, whole = cache
    chosen = np.array([1, 2, 6, 7, 13, 15, 20, 22])
    part = SubsetRows(open_cache(folder).train[0], chosen)
    assert part.shape == (len(chosen), WIDTH) and len(part) == len(chosen)
    assert torch.equal(part.read(0, len(chosen)), whole[chosen])
    assert torch.equal(part.read(2, 5), whole[chosen[2:5]]) and part.read(6, 40).shape == (2, WIDTH)
    assert torch.equal(part.take(np.array([7, 0, 3])), whole[chosen[[7, 0, 3]]])
    assert part.read(0, 3, widen=False).dtype == torch.float16
    assert torch.equal(SubsetRows(TensorRows(whole), chosen).read(0, 8), whole[chosen])


def test_tensor_rows_are_copies_the_reader_owns():
    tensor = torch.arange(12.0).view(4, 3)
    rows = TensorRows(tensor)
    batch = rows.read(1, 3)
    batch.zero_()
    assert torch.equal(tensor, torch.arange(12.0).view(4, 3))
    assert torch.equal(rows.take(np.array([3, 0])), tensor[[3, 0]])
    assert (
        rows.read(0, 2, widen=False).dtype == torch.float32
        and TensorRows(tensor.half()).read(0, 1).dtype == torch.float32
    )


def test_a_stream_reads_each_micro_batch_when_called_and_stops_between_them():
    tensor, labels = torch.arange(20.0).view(10, 2), torch.arange(10)
    asked = []
    stream = FeatureStream(TensorRows(tensor), labels, 4, torch.device("cpu"), prepare=lambda x: x.mul_(2))
    readers = list(stream.readers(np.array([1, 2, 5, 9])))
    assert len(readers) == 1
    x, y = readers[0]()
    assert torch.equal(x, 2 * tensor[[1, 2, 5, 9]]) and torch.equal(y, labels[[1, 2, 5, 9]])
    sizes = [len(read()[1]) for read in stream.readers()]
    assert sizes == [4, 4, 2]
    stopping = FeatureStream(TensorRows(tensor), labels, 4, torch.device("cpu"), stop=lambda: len(asked) == 2)
    with pytest.raises(StepInterrupted):
        for read in stopping.readers():
            asked.append(read())
    assert len(asked) == 2
