"""Training-set sizes the workflow knows before any job runs, and the checks they allow then.

A DP run needs batch <= n and delta < 1/n (n its training examples). Where the data's size
follows from its config entry alone (the embedded photo crops and digits, split as the jobs split them;
CIFAR's fixed 50,000), the plan checks both, so a bad value stops the dry run in one line
instead of failing the job hours later. Sets that are only counted when opened (ImageFolder
trees, shards, a MedMNIST file) are checked by their jobs as before.
"""

from __future__ import annotations

import math

from dpvip.data.photo_crops import split_sizes
from dpvip.errors import DpvipInputError

DIGITS_IMAGES = 1797  # scikit-learn's load_digits
# The train splits of sources whose size the source alone fixes (dpvip.randp.data reads all of it).
SOURCE_TRAIN_EXAMPLES = {"cifar10": 50_000, "cifar100": 50_000}


def _held_out(examples: int, fraction: float) -> int:
    """scikit-learn's train_test_split rounds the held-out part up (ceil(fraction * n))."""
    return math.ceil(fraction * examples)


def digits_train_examples(test_fraction: float = 0.2, validation_fraction: float = 0.0) -> int:
    """The training examples of dpvip.data.digits' split, without importing scikit-learn."""
    train = DIGITS_IMAGES - _held_out(DIGITS_IMAGES, test_fraction)
    return train - _held_out(train, validation_fraction) if validation_fraction else train


def planned_examples(spec: dict | None) -> int | None:
    """n of a dataset config entry (evaluate.datasets.*, dp_transfer.datasets.*, a DP-RandP
    task's `data`) when the entry alone fixes it; None when only the job can count it."""
    spec = spec or {}
    source = spec.get("source")
    if source == "digits":
        return digits_train_examples(float(spec.get("test_fraction", 0.2)), float(spec.get("validation_fraction") or 0))
    if source == "photo_crops":
        return split_sizes(spec)["train"]
    return SOURCE_TRAIN_EXAMPLES.get(source)


def examples_source(spec: dict, key: str) -> str:
    """Where planned_examples' n comes from, for a message: "the digits train split of KEY"."""
    split = spec.get("source") in ("digits", "photo_crops")
    held = " less its validation_fraction" if split and spec.get("validation_fraction") else ""
    return f"the {spec.get('source')} train split of {key}{held}"


def check_planned_run(
    where: str,
    examples: int,
    allow_large_delta: bool,
    *,
    batch: tuple[str, float] | None = None,
    delta: tuple[str, float | None] | None = None,
) -> None:
    """Refuse an expected batch larger than n, or delta >= 1/n, in one line naming the
    config key, its value, n and where n comes from (`where`). `batch` and `delta` are
    (config key, value); a delta of None is a run without noise, which has none."""
    if batch is not None and batch[1] is not None and batch[1] > examples:
        key, value = batch
        raise DpvipInputError(f"{key} {value:g} exceeds n = {examples} training examples ({where})")
    if delta is not None and delta[1] is not None and delta[1] * examples >= 1 and not allow_large_delta:
        key, value = delta
        raise DpvipInputError(
            f"{key} {value:g} is not below 1/n for n = {examples} training examples ({where}); "
            "lower it, or set privacy.allow_large_delta: true"
        )
