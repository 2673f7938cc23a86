"""Training-set sizes the workflow knows before any job runs, and the checks they allow then.

A DP run needs batch <= n and delta < 1/n (n its training examples). Where the data's size
follows from its config entry alone (the embedded digits, split as the jobs split them;
CIFAR's fixed 50,000), the plan checks both, so a bad value stops the dry run in one line
instead of failing the job hours later. Sets that are only counted when opened (ImageFolder
trees, shards, a MedMNIST file) are checked by their jobs as before.
"""

from __future__ import annotations

import math

from dpvip.errors import DpvipInputError
from dpvip.privacy import check_delta

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
    return SOURCE_TRAIN_EXAMPLES.get(source)


def check_planned_run(
    where: str, examples: int, delta: float | None, allow_large_delta: bool, batch_size: float | None = None
) -> None:
    """Refuse, naming the run (`where`), an expected batch larger than n or delta >= 1/n
    (delta None: a run without noise, which has no delta)."""
    try:
        if batch_size is not None and batch_size > examples:
            raise DpvipInputError(f"batch_size {batch_size:g} exceeds the {examples} training examples")
        if delta is not None:
            check_delta(delta, examples, allow_large_delta)
    except DpvipInputError as err:
        raise DpvipInputError(f"{where}: {err}") from None
