"""The photo-crops stand-in (dpvip.data.photo_crops): no pre-training pixel downstream, train
and test crops from disjoint parts of each photo, deterministic, sized as the plan counts it,
and a task on which raw pixels stay well below what features can reach (the issue's design
bound: a raw-pixel linear probe at most 60%, chance at most 10%) while still above chance."""

from __future__ import annotations

import numpy as np
import pytest

from dpvip.data import natural, photo_crops
from dpvip.errors import DpvipInputError
from dpvip.evaluate.datasets import labelled_split, photo_crops_splits
from dpvip.plan.examples import planned_examples

SMALL = {"train_per_class": 40, "test_per_class": 20}


def grey(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image, dtype=np.float32)
    return image[..., :3] @ np.array([0.2125, 0.7154, 0.0721], dtype=np.float32) if image.ndim == 3 else image


def test_no_class_is_a_pretraining_photograph():
    assert not set(photo_crops.PHOTOS) & set(natural.PHOTOS)
    laion = [grey(natural.photo(name)) / 255.0 for name in natural.PHOTOS]
    for name in photo_crops.PHOTOS:
        mine = photo_crops.load_photo(name)
        for theirs in laion:
            assert mine.shape != theirs.shape or not np.allclose(mine, theirs, atol=0.02), name
    assert photo_crops.CLASSES == 11  # chance 9.1%


def test_train_and_test_crops_come_from_disjoint_parts_of_each_photo():
    split = photo_crops.photo_crops_split(**SMALL)
    widths = {label: photo_crops.load_photo(name).shape[1] for label, name in enumerate(photo_crops.PHOTOS)}
    for part in ("train", "test"):
        for index in split[part]:
            top, left, side = split["boxes"][index]
            width = widths[int(split["labels"][index])]
            if part == "train":
                assert left + side <= int(photo_crops.TEST_FROM * width)
            else:
                assert left >= int(photo_crops.TEST_FROM * width)
    assert split["pixels"].shape == (11 * 60, photo_crops.SIZE, photo_crops.SIZE)
    assert np.bincount(split["labels"][split["test"]]).tolist() == [20] * 11


def test_the_set_is_a_function_of_its_settings():
    first, again = photo_crops.photo_crops_split(**SMALL), photo_crops._split.__wrapped__(40, 20, 0, 0.0)
    assert np.array_equal(first["pixels"], again["pixels"])
    other = photo_crops.photo_crops_split(**SMALL, seed=1)
    assert not np.array_equal(first["pixels"], other["pixels"])


def test_sizes_match_what_the_plan_counts():
    spec = {"source": "photo_crops", **SMALL, "validation_fraction": 0.1}
    splits = photo_crops_splits(12, spec)
    sizes = photo_crops.split_sizes(spec)
    assert {name: len(data) for name, data in splits.items()} == sizes == {"train": 396, "validation": 44, "test": 220}
    assert planned_examples(spec) == 396
    assert splits["train"].images.shape[1:] == (3, 12, 12) and splits["test"].classes == 11
    train, test, facts = labelled_split("ImageNet-1K", {"source": "photo_crops", **SMALL}, 16)
    assert facts == {"stand_in": photo_crops.STAND_IN, "train": 440, "test": 220} and test.name == "photo_crops"


def test_bad_settings_are_named():
    with pytest.raises(DpvipInputError, match="train_per_class must be a positive integer"):
        photo_crops.photo_crops_split(train_per_class=0)


def test_raw_pixels_stay_far_below_a_perfect_probe_but_above_chance():
    """A logistic regression on the raw 12 px pixels of the default set: measured 31.7%
    (chance 9.1%); 34.0% at 32 px (the design bound is 60%)."""
    from sklearn.linear_model import LogisticRegression

    splits = photo_crops_splits(12)
    train, test = splits["train"], splits["test"]
    model = LogisticRegression(max_iter=2000).fit(train.images[:, 0].flatten(1).numpy(), train.labels.numpy())
    accuracy = model.score(test.images[:, 0].flatten(1).numpy(), test.labels.numpy())
    assert 100 / 11 + 10 < 100 * accuracy <= 60, accuracy
