"""scikit-learn's handwritten digits (1,797 real 8x8 images, 10 classes), the embedded
stand-in for the labelled classification sets, with seeded stratified splits.

The arrays and splits are kept in the disk memo (`dpvip.memo`): importing scikit-learn
costs a job 3 s, and some 50 jobs of the embedded workflow read the digits.
"""

from __future__ import annotations

import numpy as np

from dpvip.errors import DpvipInputError
from dpvip.memo import memoised

CLASSES = 10
MAX_VALUE = 16  # digits' pixels are counts 0..16


def check_fraction(name: str, fraction: float, low_inclusive: bool = False) -> None:
    if not (0 <= fraction < 1 if low_inclusive else 0 < fraction < 1):
        interval = "[0, 1)" if low_inclusive else "(0, 1)"
        raise DpvipInputError(f"{name} {fraction} is outside {interval}")


def digits_split(test_fraction: float, seed: int, validation_fraction: float = 0.0) -> dict[str, np.ndarray]:
    """{'pixels' (1797, 8, 8) uint8 in 0..16, 'labels' (1797,) int64, 'train', 'test'} with
    sorted indices of a split stratified by class; with `validation_fraction`, also
    'kept' and 'held': sorted positions within 'train' of a second stratified split (the
    same seed). Do not modify the arrays: they are shared."""
    check_fraction("test_fraction", test_fraction)  # before the memo: bad input costs nothing
    check_fraction("validation_fraction", validation_fraction, low_inclusive=True)
    return _split(test_fraction, seed, validation_fraction)


@memoised("digits", ("data/digits.py",), ("scikit-learn", "numpy"))
def _split(test_fraction: float, seed: int, validation_fraction: float) -> dict[str, np.ndarray]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    labels = data.target.astype(np.int64)
    train, test = train_test_split(np.arange(len(labels)), test_size=test_fraction, random_state=seed, stratify=labels)
    split = {"pixels": data.images.astype(np.uint8), "labels": labels, "train": np.sort(train), "test": np.sort(test)}
    if validation_fraction:
        kept, held = train_test_split(
            np.arange(len(train)), test_size=validation_fraction, random_state=seed, stratify=labels[split["train"]]
        )
        split["kept"], split["held"] = np.sort(kept), np.sort(held)
    return split
