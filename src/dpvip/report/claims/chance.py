"""Chance level of a classification task, and which accuracy cells of ours sit at or near it.

At embedded scale a 10-class stand-in (scikit-learn digits) replaces CIFAR-10, CIFAR-100,
DermaMNIST and ImageNet alike, so chance is 10% whatever the paper's task; an accuracy of 7-18%
on it is no evidence of learning, and a reader comparing it with the paper's 60-90% must
be told. The class count comes from what the results record, else from the stand-in, else
from the task itself (real data at paper scale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

STAND_IN_CLASSES = {"scikit-learn digits": 10, "photo crops (11 scikit-image photographs)": 11}
# a config's data source -> its stand-in
STAND_IN_OF_SOURCE = {"digits": "scikit-learn digits", "photo_crops": "photo crops (11 scikit-image photographs)"}
TASK_CLASSES = {
    "CIFAR-10": 10,
    "CIFAR-100": 100,
    "DermaMNIST": 7,
    "ImageNet-1k": 1000,
    "ImageNet-1K": 1000,  # ViP's spelling
    "Places-365": 365,
    "Places-205": 205,
    "iNat-2021": 10_000,
    "Aircraft": 100,
    "Caltech-101": 101,
}
# A single run's accuracy on n examples of a chance-level classifier has the binomial std
# sqrt(p (1 - p) / n); two of them cover ~95% of such runs.
STANDARD_ERRORS = 2


@dataclass(frozen=True)
class Chance:
    classes: int
    examples: int | None  # the evaluated split's size (None: unknown)
    data: str  # what the classes are of, e.g. 'scikit-learn digits (standing in for CIFAR-10)'

    @property
    def level(self) -> float:
        """Accuracy (%) of guessing a class uniformly at random."""
        return 100.0 / self.classes

    @property
    def noise(self) -> float:
        """Percentage points above chance within which one run is not told apart from it."""
        if not self.examples:
            return 0.0
        p = 1.0 / self.classes
        return 100.0 * STANDARD_ERRORS * math.sqrt(p * (1 - p) / self.examples)


def classes_of(task: str, recorded: int | None = None, stand_in: str | None = None) -> int | None:
    """The class count: as recorded, else the stand-in's, else the task's (None: unknown)."""
    if recorded:
        return int(recorded)
    if stand_in:
        return STAND_IN_CLASSES.get(stand_in)
    return TASK_CLASSES.get(task)


def recorded_chance(task: str, record: dict | None, stand_in: str | None, description: str) -> Chance | None:
    """The chance level of what a result or feature cache records (`record`: its classes and
    test count; where a user's image folder's test split lacks some of the training split's
    classes, `classes_tested` and `classes_missing_from_test`), else of the stand-in or the
    task; `description` says what the classes are of. None: unknown."""
    record = record or {}
    classes = classes_of(task, record.get("classes_tested") or record.get("classes"), stand_in)
    if not classes:
        return None
    missing = record.get("classes_missing_from_test")
    if missing:
        description = (
            f"{description}; its test split lacks class(es) {', '.join(missing)} of the training split, "
            f"so chance is over the {record['classes_tested']} classes tested"
        )
    return Chance(classes, record.get("test"), description)


def chance_note(chance: Chance) -> str:
    return f"Chance level: {chance.classes} classes of {chance.data}, so guessing scores {chance.level:.3g}%."


def flag_notes(cells: dict[str, float], chance: Chance) -> list[str]:
    """Notes naming the cells (label: accuracy %) at or below chance, and those above it by
    less than one run's binomial noise on the evaluated split."""
    at_or_below = {label: v for label, v in cells.items() if not math.isnan(v) and v <= chance.level}
    near = {
        label: v for label, v in cells.items() if not math.isnan(v) and chance.level < v <= chance.level + chance.noise
    }
    notes = []
    if at_or_below:
        notes.append(f"At or below chance ({chance.level:.3g}%): {_listed(at_or_below)}.")
    if near:
        notes.append(
            f"Above chance by less than {STANDARD_ERRORS} binomial standard errors of one run on "
            f"{chance.examples} evaluated examples (≤ {chance.level + chance.noise:.3g}%), so not told apart "
            f"from guessing: {_listed(near)}."
        )
    return notes


def _listed(cells: dict[str, float]) -> str:
    return "; ".join(f"{label} ({value:.1f})" for label, value in cells.items())
