"""The natural-image stand-in for LAION: shards are pure functions of (settings, shard) — the
same bytes on every run and when one shard is regenerated alone — holding LAION-format
samples (jpg of the configured size, caption, img2dataset's json fields) that the training
data pipeline reads."""

from __future__ import annotations

import io
import json
import tarfile

import numpy as np
import pytest
from PIL import Image

from dpvip.data.images import AugmentedImages, mae_augmentation
from dpvip.data.natural import CROP_FRACTION, PACKAGE_NAMES, PHOTOS, STAND_IN_FOR, NaturalSpec, crop_sample, photo
from dpvip.data.natural import write_natural_dataset, write_natural_shard
from dpvip.data.shard_reader import ShardReader
from dpvip.errors import DpvipInputError
from dpvip.files import sha256
from dpvip.synthetic.shards import shard_name
from natural_data import NATURAL, natural_index  # noqa: F401  (fixture)

IMG2DATASET_FIELDS = {
    "key",
    "url",
    "caption",
    "status",
    "error_message",
    "width",
    "height",
    "original_width",
    "original_height",
}


def test_every_photo_ships_offline_as_rgb():
    for name in PHOTOS:
        image = photo(name)
        assert image.ndim == 3 and image.shape[2] == 3 and min(image.shape[:2]) >= 100, name


def test_the_same_settings_write_the_same_bytes_and_one_shard_regenerates_alone(natural_index, tmp_path):
    folder = natural_index.parent
    index = json.loads(natural_index.read_text())
    assert [shard["file"] for shard in index["shards"]] == [shard_name(s) for s in range(3)]
    assert [shard["samples"] for shard in index["shards"]] == [10, 10, 5]
    alone = tmp_path / "alone.tar"
    write_natural_shard(NATURAL, 1, alone, progress=False)
    assert sha256(alone) == sha256(folder / shard_name(1)) == index["shards"][1]["sha256"]
    write_natural_dataset(NATURAL, tmp_path / "again", progress=False)
    again = json.loads((tmp_path / "again" / "index.json").read_text())
    assert again == index  # shard hashes, sizes and member tables alike


def test_another_seed_gives_other_crops():
    other = NaturalSpec(images=25, resolution=32, shard_size=10, seed=4)
    assert crop_sample(other, 0)["jpg"] != crop_sample(NATURAL, 0)["jpg"]
    assert crop_sample(NATURAL, 0) == crop_sample(NATURAL, 0)


def test_samples_are_laion_format_crops_that_say_what_they_stand_in_for(natural_index):
    reader = ShardReader.from_index(natural_index)
    for position in range(len(reader)):
        sample = reader[position]
        assert set(sample) == {"__key__", "jpg", "txt", "json"} and sample["__key__"] == f"{position:09d}"
        meta = json.loads(sample["json"])
        assert IMG2DATASET_FIELDS <= set(meta) and meta["status"] == "success" and meta["key"] == sample["__key__"]
        package = PHOTOS[meta["photo"]][0]
        assert sample["txt"].decode() == meta["caption"] == f"crop of {PACKAGE_NAMES[package]} '{meta['photo']}'"
        assert meta["url"] == f"{package}://{meta['photo']}"
        assert meta["stand_in_for"] == STAND_IN_FOR and meta["index"] == position
        with Image.open(io.BytesIO(sample["jpg"])) as image:
            assert (
                image.format == "JPEG"
                and image.mode == "RGB"
                and image.size == (32, 32) == (meta["width"], meta["height"])
            )
        crop, shorter = meta["crop"], min(meta["original_width"], meta["original_height"])
        assert CROP_FRACTION[0] * shorter - 1 <= crop["side"] <= shorter
        assert 0 <= crop["left"] <= meta["original_width"] - crop["side"]
        assert 0 <= crop["top"] <= meta["original_height"] - crop["side"]


def test_a_crop_is_the_photo_region_its_metadata_names():
    sample = crop_sample(NaturalSpec(images=1, resolution=64, shard_size=1, seed=0), 0)
    meta = json.loads(sample["json"])
    box = meta["crop"]
    left, top, side = box["left"], box["top"], box["side"]
    region = Image.fromarray(photo(meta["photo"])).crop((left, top, left + side, top + side))
    expected = region.resize((64, 64), Image.Resampling.LANCZOS)
    if box["flip"]:
        expected = expected.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    with Image.open(io.BytesIO(sample["jpg"])) as image:
        difference = np.asarray(image, dtype=float) - np.asarray(expected, dtype=float)
    assert np.abs(difference).mean() < 6  # JPEG at quality 95 and the faster reduction


def test_dataset_and_index_name_the_stand_in(natural_index):
    record = json.loads((natural_index.parent / "dataset.json").read_text())
    index = json.loads(natural_index.read_text())
    assert record["stand_in_for"] == index["stand_in_for"] == STAND_IN_FOR
    assert index["source"] == "natural" and index["total_samples"] == 25 and index["failures"]["count"] == 0
    assert (record["images"], record["resolution"], record["shard_size"], record["seed"]) == (25, 32, 10, 3)


def test_a_folder_holding_crops_with_other_settings_is_refused(natural_index):
    with pytest.raises(DpvipInputError, match="holds a dataset generated with other settings"):
        write_natural_dataset(
            NaturalSpec(images=25, resolution=64, shard_size=10, seed=3), natural_index.parent, progress=False
        )


def test_augmented_images_read_the_crops(natural_index):
    images = AugmentedImages(ShardReader.from_index(natural_index), mae_augmentation(16), mask_patches=16)
    image, noise = images[(7, 123)]
    assert image.shape == (3, 16, 16) and noise.shape == (16,) and image.std() > 0.05


@pytest.mark.parametrize(
    "values, message",
    [
        ({"images": 0, "resolution": 32, "shard_size": 10}, "images must be a positive integer (got 0)"),
        ({"images": 10, "resolution": 32.5, "shard_size": 10}, "resolution must be a positive integer (got 32.5)"),
        ({"images": 10, "resolution": 32}, "shard_size must be a positive integer (got None)"),
        (
            {"images": 10, "resolution": 32, "shard_size": 10, "seed": -1},
            "seed must be a non-negative integer (got -1)",
        ),
    ],
)
def test_bad_settings_are_named_in_one_line(values, message):
    with pytest.raises(DpvipInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        NaturalSpec.from_config(values)


def test_shards_are_plain_tars_with_fixed_mtime(natural_index):
    with tarfile.open(natural_index.parent / shard_name(2)) as archive:
        members = archive.getmembers()
    assert len(members) == 15 and {member.mtime for member in members} == {0}
