"""The private tasks' data: digits with a validation split, MedMNIST files, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from dpvip.errors import DpvipInputError
from dpvip.randp.data import private_splits


def test_digits_with_a_stratified_validation_split():
    splits, facts = private_splits("CIFAR-10", {"source": "digits", "validation_fraction": 0.1}, 12)
    assert facts == {"stand_in": "scikit-learn digits", "train": 1293, "test": 360, "validation": 144, "classes": 10}
    assert splits["train"].images.shape[1:] == (3, 12, 12)
    assert set(splits["validation"].labels.tolist()) == set(range(10))
    without, facts = private_splits("CIFAR-10", {"source": "digits"}, 12)
    assert "validation" not in without and facts["validation"] is None


def test_medmnist_npz_with_its_three_splits(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {}
    for split, n in (("train", 20), ("val", 5), ("test", 7)):
        arrays[f"{split}_images"] = rng.integers(0, 256, size=(n, 28, 28, 3), dtype=np.uint8)
        arrays[f"{split}_labels"] = rng.integers(0, 7, size=(n, 1))
    arrays["train_labels"][0] = 6
    np.savez(tmp_path / "dermamnist.npz", **arrays)
    splits, facts = private_splits("DermaMNIST", {"source": "medmnist", "path": str(tmp_path / "dermamnist.npz")}, 32)
    assert facts == {"train": 20, "test": 7, "validation": 5, "classes": 7}
    assert splits["train"].classes == 7 and splits["test"].images.shape == (7, 3, 32, 32)
    assert splits["validation"].labels.tolist() == arrays["val_labels"].reshape(-1).tolist()


def test_missing_data_is_named(tmp_path):
    with pytest.raises(DpvipInputError, match=f"no CIFAR10 data under {tmp_path}"):
        private_splits("CIFAR-10", {"source": "cifar10", "root": str(tmp_path)}, 32)
    with pytest.raises(DpvipInputError, match="MedMNIST file .*missing.npz does not exist"):
        private_splits("DermaMNIST", {"source": "medmnist", "path": str(tmp_path / "missing.npz")}, 32)
    with pytest.raises(DpvipInputError, match="source 'svhn' is not one of"):
        private_splits("CIFAR-10", {"source": "svhn"}, 32)
