"""Image `i` is a pure function of (family, options, dataset seed, i): the same in every run,
every shard split and every batch; different indices and different seeds give different images."""

import hashlib
from itertools import combinations

import numpy as np
import pytest

from dpvip.synthetic import family_class
from dpvip.synthetic.shards import read_images, shard_name, write_shard
from dpvip.synthetic.spec import DatasetSpec

RESOLUTION = 16
# block_size 3 divides neither shard size used below (7, 20), so stylegan blocks straddle
# shard borders; rebuild_every 4 puts several networks (and network changes inside blocks) in play.
OPTIONS = {"shaders": {}, "stylegan_oriented": {"block_size": 3, "rebuild_every": 4}, "dead_leaves": {}}
FAMILIES = list(OPTIONS)


def render(family: str, start: int, stop: int, seed: int = 0) -> dict[int, np.ndarray]:
    """Images start..stop-1 from a freshly constructed generator (as a separate run would)."""
    generator = family_class(family)(RESOLUTION, seed=seed, **OPTIONS[family])
    return dict(generator.images(start, stop))


@pytest.mark.parametrize("family", FAMILIES)
def test_fresh_generators_give_byte_identical_images(family):
    first, second = render(family, 0, 8), render(family, 0, 8)
    assert sorted(first) == list(range(8))
    for index in range(8):
        assert first[index].dtype == np.uint8 and first[index].shape == (RESOLUTION, RESOLUTION, 3)
        assert first[index].tobytes() == second[index].tobytes(), f"{family} image {index}"


@pytest.mark.parametrize("family", FAMILIES)
def test_image_does_not_depend_on_the_range_that_asked_for_it(family):
    # Ranges starting mid-block (5, 7) and a lone image (10) against one run over 0..12.
    whole = render(family, 0, 12)
    parts = render(family, 5, 7) | render(family, 7, 10) | render(family, 10, 11) | render(family, 11, 12)
    for index, image in parts.items():
        assert np.array_equal(image, whole[index]), f"{family} image {index}"
    assert sorted(parts) == list(range(5, 12))


def _write_dataset(tmp_path, family: str, shard_size: int) -> tuple[list[np.ndarray], list[dict]]:
    spec = DatasetSpec.from_config(
        family,
        {
            "family": family,
            "images": 20,
            "resolution": RESOLUTION,
            "shard_size": shard_size,
            "options": OPTIONS[family],
        },
    )
    images, metas = [], []
    for shard in range(spec.shards):
        path = tmp_path / f"split{shard_size}" / shard_name(shard)
        assert write_shard(spec, shard, path, progress=False) == len(spec.shard_range(shard))
        for image, meta in read_images(path):
            images.append(image)
            metas.append(meta)
    return images, metas


@pytest.mark.parametrize("family", FAMILIES)
def test_shard_split_does_not_change_any_image(tmp_path, family):
    small, small_meta = _write_dataset(tmp_path, family, 7)  # shards of 7, 7, 6
    large, large_meta = _write_dataset(tmp_path, family, 20)  # one shard
    assert len(small) == len(large) == 20
    assert [m["index"] for m in small_meta] == list(range(20))
    direct = render(family, 0, 20)
    for index in range(20):
        assert np.array_equal(small[index], large[index]), f"{family} image {index}"
        assert np.array_equal(small[index], direct[index]), f"{family} image {index} changed by PNG round trip"
        assert small_meta[index] == large_meta[index]


@pytest.mark.parametrize("family", FAMILIES)
def test_same_shard_written_twice_has_the_same_bytes(tmp_path, family):
    spec = DatasetSpec.from_config(
        family, {"family": family, "images": 10, "resolution": RESOLUTION, "shard_size": 4, "options": OPTIONS[family]}
    )
    digests = []
    for run in ("a", "b"):
        path = tmp_path / run / shard_name(1)
        write_shard(spec, 1, path, progress=False)
        digests.append(hashlib.sha256(path.read_bytes()).hexdigest())
    assert digests[0] == digests[1]


@pytest.mark.parametrize("family", FAMILIES)
def test_different_indices_give_different_images(family):
    images = render(family, 0, 6)
    for a, b in combinations(range(6), 2):
        assert not np.array_equal(images[a], images[b]), f"{family} images {a} and {b} are equal"


@pytest.mark.parametrize("family", FAMILIES)
def test_different_dataset_seeds_give_different_images(family):
    seed0, seed1 = render(family, 0, 4, seed=0), render(family, 0, 4, seed=1)
    for index in range(4):
        assert not np.array_equal(seed0[index], seed1[index]), f"{family} image {index}"
