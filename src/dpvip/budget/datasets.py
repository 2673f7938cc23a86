"""How many examples a job reads, and how many classes they have.

Paper-scale sets (ImageFolder trees, COCO, ADE20K, CIFAR, MedMNIST) are only opened when a
job runs, so their sizes come from the data file (config/paper_values/compute_budget.yaml,
`datasets`, each with its source). The embedded stand-ins are sized from their own code:
scikit-learn's digits split as the jobs split it, the generated shapes from the config.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dpvip.errors import DpvipInputError

SHAPE_CLASSES = {"coco": 3, "ade20k": 4}  # circle, square, triangle (+ background for ADE20K)


@dataclass(frozen=True)
class Examples:
    train: int
    test: int
    classes: int
    source: str


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _photo_crops(spec: dict) -> Examples:
    from dpvip.data.photo_crops import CLASSES, STAND_IN, split_sizes

    sizes = split_sizes(spec)
    return Examples(sizes["train"], sizes["test"], CLASSES, f"{STAND_IN} (the embedded stand-in)")


def _digits(spec: dict) -> Examples:
    from dpvip.data.digits import CLASSES, digits_split

    split = digits_split(
        spec.get("test_fraction", 0.2), spec.get("seed", 0), float(spec.get("validation_fraction") or 0)
    )
    return Examples(len(split["train"]), len(split["test"]), CLASSES, "scikit-learn digits (the embedded stand-in)")


class DatasetSizes:
    """Sizes by dataset name (case and punctuation ignored), from the data file's `datasets`."""

    def __init__(self, table: dict):
        self.table = {_key(name): entry for name, entry in table.items()}

    def known(self, name: str, spec: dict | None = None) -> Examples | None:
        """The set called `name` (an ImageFolder tree, a DP-RandP task, ...) as `spec` (its
        config entry) reads it; None when neither its name nor its source is in the table."""
        spec = spec or {}
        if spec.get("source") == "digits":
            return _digits(spec)
        if spec.get("source") == "photo_crops":
            return _photo_crops(spec)
        for key in (_key(name), _key(str(spec.get("source", "")))):
            if key in self.table:
                entry = self.table[key]
                validation = float(spec.get("validation_fraction") or 0)
                train = round(entry["train"] * (1 - validation))
                return Examples(train, entry["test"], entry["classes"], entry.get("source", name))
        return None

    def of(self, name: str, spec: dict | None = None) -> Examples:
        found = self.known(name, spec)
        if found is None:
            raise DpvipInputError(f"dataset '{name}' has no size in the compute budget's data file (datasets)")
        return found

    def task(self, task: str, section: dict) -> Examples:
        """COCO or ADE20K as the `evaluate` section reads it: the real set or the shapes stand-in."""
        options = section[task]
        if options.get("source") == "standin":
            shapes = section.get("shapes", {})
            return Examples(
                shapes["train_images"], shapes["val_images"], SHAPE_CLASSES[task], "generated shapes (stand-in)"
            )
        return self.of(task)
