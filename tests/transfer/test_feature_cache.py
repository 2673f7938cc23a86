"""Feature caches: the features of every view and of the test split read back as computed; a
second run of the same fingerprint never calls the extractor; a run crashed mid-way resumes
with only the missing shards and ends with the arrays of an uninterrupted run; another
fingerprint recomputes; an incomplete or damaged cache is refused in one line."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from dpvip.errors import DpvipInputError
from dpvip.evaluate.datasets import LabelledImages
from dpvip.transfer.cache import cache_features, load_cache

N_TRAIN, N_TEST, VIEWS, SHARD = 10, 5, 2, 4  # 3 train shards per view, 2 test shards
SHARDS = VIEWS * 3 + 2
FINGERPRINT = {"network": "tiny", "recipe": "linear", "crop": ("shift", 1)}
WEIGHT = torch.randn(3 * 4 * 4, 6, generator=torch.Generator().manual_seed(0))


def split(n: int, seed: int) -> LabelledImages:
    generator = torch.Generator().manual_seed(seed)
    return LabelledImages(
        torch.randn(n, 3, 4, 4, generator=generator), torch.randint(0, 3, (n,), generator=generator), 3, "tiny"
    )


@pytest.fixture
def data() -> tuple[LabelledImages, LabelledImages]:
    return split(N_TRAIN, 1), split(N_TEST, 2)


def augment(images: torch.Tensor, view: int, indices: torch.Tensor) -> torch.Tensor:
    """A stand-in for crops: a function of the images, the view and the dataset indices."""
    return images + view + 0.01 * indices.view(-1, 1, 1, 1)


class Extractor:
    """A linear map of the flattened images that counts its calls (one per batch) and, with
    `fail_after`, raises on the call after that many."""

    def __init__(self, fail_after: int | None = None):
        self.calls, self.fail_after = 0, fail_after

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError("extractor crashed")
        self.calls += 1
        return images.flatten(1) @ WEIGHT


def build(extractor, data, out, **changes) -> dict:
    """A cache of 2 views, one batch per shard (so calls count shards)."""
    train, test = data
    options = {
        "fingerprint": FINGERPRINT,
        "views": VIEWS,
        "augment": augment,
        "batch_size": SHARD,
        "shard_size": SHARD,
        "progress": False,
    } | changes
    return cache_features(extractor, train, test, out, **options)


def test_features_read_back_as_computed(data, tmp_path):
    train, test = data
    meta = cache_features(
        Extractor(),
        train,
        test,
        tmp_path / "cache",
        fingerprint=FINGERPRINT,
        views=VIEWS,
        augment=augment,
        batch_size=3,
        shard_size=SHARD,
        progress=False,
    )
    cached = load_cache(tmp_path / "cache")
    expected = torch.stack(
        [augment(train.images, view, torch.arange(N_TRAIN)).flatten(1) @ WEIGHT for view in range(VIEWS)]
    )
    assert cached.train.shape == (VIEWS, N_TRAIN, 6) and cached.train.dtype == torch.float32
    assert torch.allclose(cached.train, expected, atol=1e-6)
    assert torch.allclose(cached.test, test.images.flatten(1) @ WEIGHT, atol=1e-6)  # never augmented
    assert torch.equal(cached.train_labels, train.labels) and torch.equal(cached.test_labels, test.labels)
    assert cached.train_labels.dtype == torch.int64 and cached.classes == 3
    assert (meta["views"], meta["width"], meta["train"], meta["test"], meta["dtype"]) == (
        VIEWS,
        6,
        N_TRAIN,
        N_TEST,
        "float32",
    )
    assert meta["fingerprint"] == json.loads(json.dumps(FINGERPRINT)) and cached.meta == meta
    names = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert names == sorted([*meta["files"], "meta.json"])
    assert "train_v1_00002.npy" in names and "test_00001.npy" in names
    assert not (tmp_path / "cache.partial").exists()


def test_one_view_without_augmentation_and_float16(data, tmp_path):
    train, test = data
    cache_features(Extractor(), train, test, tmp_path / "f32", fingerprint=FINGERPRINT, progress=False)
    cache_features(Extractor(), train, test, tmp_path / "f16", fingerprint=FINGERPRINT, dtype="float16", progress=False)
    full, half = load_cache(tmp_path / "f32"), load_cache(tmp_path / "f16")
    assert full.train.shape == (1, N_TRAIN, 6) and half.train.dtype == torch.float32
    assert torch.allclose(full.train[0], train.images.flatten(1) @ WEIGHT, atol=1e-6)
    assert torch.allclose(half.train, full.train, rtol=1e-3, atol=1e-2) and not torch.equal(half.train, full.train)
    assert np.load(tmp_path / "f16" / "train_v0_00000.npy").dtype == np.float16


def test_a_complete_cache_of_the_same_fingerprint_is_reused(data, tmp_path):
    first = build(Extractor(), data, tmp_path / "cache")
    again = Extractor()
    assert build(again, data, tmp_path / "cache") == first
    assert again.calls == 0


def test_a_crashed_run_resumes_with_the_missing_shards_only(data, tmp_path):
    reference = build(Extractor(), data, tmp_path / "reference")
    with pytest.raises(RuntimeError, match="extractor crashed"):
        build(Extractor(fail_after=3), data, tmp_path / "cache")
    work = tmp_path / "cache.partial"
    assert len(list(work.glob("*_000*.npy"))) == 3 and not (tmp_path / "cache").exists()
    with pytest.raises(DpvipInputError, match=r"cache is not a complete feature cache"):
        load_cache(tmp_path / "cache")
    rerun = Extractor()
    resumed = build(rerun, data, tmp_path / "cache")
    assert rerun.calls == SHARDS - 3
    assert resumed["files"] == reference["files"]  # the same bytes, by their hashes
    assert torch.equal(load_cache(tmp_path / "cache").train, load_cache(tmp_path / "reference").train)
    assert not work.exists()


def test_another_fingerprint_recomputes(data, tmp_path, caplog):
    build(Extractor(), data, tmp_path / "cache")
    with pytest.raises(RuntimeError):
        build(Extractor(fail_after=2), data, tmp_path / "cache", fingerprint={"network": "other"})
    with caplog.at_level(logging.INFO, logger="dpvip.transfer.cache"):
        rerun = Extractor()
        meta = build(rerun, data, tmp_path / "cache", fingerprint={"network": "third"})
    assert rerun.calls == SHARDS  # neither the complete cache nor the partial shards kept
    assert meta["fingerprint"] == {"network": "third"} and load_cache(tmp_path / "cache").meta == meta
    assert "emptying the feature work folder" in caplog.text and "another fingerprint" in caplog.text
    views = Extractor()
    build(views, data, tmp_path / "cache", fingerprint={"network": "third"}, views=1)  # another layout
    assert views.calls == 3 + 2


def test_a_precreated_output_folder_is_replaced(data, tmp_path):
    (tmp_path / "cache").mkdir()  # as Snakemake makes a directory() output
    (tmp_path / "cache" / "stale.txt").write_text("old")
    build(Extractor(), data, tmp_path / "cache")
    assert not (tmp_path / "cache" / "stale.txt").exists()
    assert load_cache(tmp_path / "cache").train.shape == (VIEWS, N_TRAIN, 6)


def test_an_incomplete_folder_is_refused_in_one_line(tmp_path):
    (tmp_path / "cache").mkdir()
    with pytest.raises(DpvipInputError, match=r"^\S*cache is not a complete feature cache \(no readable meta.json\)$"):
        load_cache(tmp_path / "cache")


def test_a_missing_or_altered_shard_is_detected(data, tmp_path):
    build(Extractor(), data, tmp_path / "cache")
    shard = tmp_path / "cache" / "train_v1_00001.npy"
    original = shard.read_bytes()
    shard.unlink()
    with pytest.raises(DpvipInputError, match=r"cache lacks train_v1_00001\.npy$"):
        load_cache(tmp_path / "cache")
    altered = bytearray(original)
    altered[-1] ^= 0xFF  # same size, another value
    shard.write_bytes(bytes(altered))
    with pytest.raises(DpvipInputError, match=r"train_v1_00001\.npy differs from the one recorded in meta\.json$"):
        load_cache(tmp_path / "cache")
    shard.unlink()
    rerun = Extractor()
    build(rerun, data, tmp_path / "cache")  # a damaged cache is not reused
    assert rerun.calls == SHARDS and torch.equal(load_cache(tmp_path / "cache").train_labels, data[0].labels)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"augment": None}, r"2 feature views need an augmentation"),
        ({"dtype": "int8"}, r"feature cache dtype 'int8' is not one of float32, float16"),
        ({"shard_size": 0}, r"feature cache shard_size 0 must be a positive integer"),
    ],
)
def test_bad_cache_settings_are_refused(data, tmp_path, changes, message):
    with pytest.raises(DpvipInputError, match=message):
        build(Extractor(), data, tmp_path / "cache", **changes)


def test_an_empty_split_is_refused(tmp_path):
    with pytest.raises(DpvipInputError, match=r"the test split of tiny holds no images"):
        cache_features(
            Extractor(), split(4, 1), split(0, 2), tmp_path / "cache", fingerprint=FINGERPRINT, progress=False
        )


def test_an_extractor_giving_the_wrong_rows_is_refused(data, tmp_path):
    with pytest.raises(
        DpvipInputError, match=r"the feature extractor gave \(1, 6\) for 4 images, not \(images, width\)"
    ):
        build(lambda images: Extractor()(images)[:1], data, tmp_path / "cache")


def test_a_test_split_lacking_a_class_is_recorded_for_the_chance_level(tmp_path):
    """A user's test folder without one of the training classes: the cache says which, so
    the tables put chance over the classes tested (it said 4 classes where 3 were tested)."""
    train = LabelledImages(torch.randn(8, 3, 4, 4), torch.tensor([0, 1, 2, 3] * 2), 4, "mine")
    train.class_names = ["astronaut", "chelsea", "coffee", "rocket"]
    test = LabelledImages(torch.randn(3, 3, 4, 4), torch.tensor([0, 2, 3]), 4, "mine")
    meta = build(Extractor(), (train, test), tmp_path / "cache", views=1, augment=None)
    assert (meta["classes"], meta["classes_tested"], meta["classes_missing_from_test"]) == (4, 3, ["chelsea"])
    whole = build(Extractor(), (train, train), tmp_path / "whole", views=1, augment=None)
    assert "classes_tested" not in whole
