"""Choosing a hyper-parameter from a grid: on a validation split cut from the training data
(the default), or on test accuracy (the papers' practice, kept as an option and labelled).

ViP reports the best test accuracy of its linear probe's base-learning-rate grid, and Mehta
et al. the best test accuracy of their learning-rate grid: the maximum of several noisy test
scores is biased upwards (the winner's curse). With `mode: validation` a share `fraction` of
the training split (ceil(fraction * n) examples, as scikit-learn's train_test_split counts
it) is held out before any grid point trains; every point trains on the rest, the point best
on the held-out share is chosen, and the chosen point's test accuracy is reported. The test
split then chooses nothing. With `mode: test` nothing is held out and the point best on test
accuracy is reported, as the papers do: optimistic, and every note showing it says so.

The split is deterministic (numpy's generator from `seed`). `stratified` keeps each class's
share (largest remainders, so the total is exact); the DP heads use a uniform cut instead,
which reads no label, so the partition does not depend on the private data's content
(`dpvip.plan.transfer` says why). Torch-free: the plan and the reports import it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np

from dpvip.errors import DpvipInputError

MODES = ("validation", "test")
TEST_LABEL = "picked on test accuracy (the paper's practice; optimistic)"


@dataclass(frozen=True)
class Selection:
    mode: str = "validation"  # validation | test
    fraction: float = 0.1  # of the training split held out (validation mode)
    seed: int = 0  # of the cut
    stratified: bool = True  # each class holds out its share; False: a uniform cut (reads no label)

    @classmethod
    def of(cls, section: Mapping | Selection | None) -> Selection:
        """The selection a config section (`selection: {mode, fraction, seed}`) asks for;
        None: the default (validation, 10%)."""
        if isinstance(section, Selection):
            return section
        selection = cls(**dict(section or {}))
        selection.check()
        return selection

    @property
    def validating(self) -> bool:
        return self.mode == "validation"

    def split(self, labels) -> tuple[np.ndarray, np.ndarray]:
        """(kept, held) positions of `labels`' examples (`validation_split`)."""
        return validation_split(labels, self.fraction, self.seed, self.stratified)

    def check(self) -> None:
        if self.mode not in MODES:
            raise DpvipInputError(f"selection mode '{self.mode}' is not one of {', '.join(MODES)}")
        if self.validating and not 0 < self.fraction < 1:
            raise DpvipInputError(f"selection fraction {self.fraction} is outside (0, 1)")
        if int(self.seed) != self.seed or self.seed < 0:
            raise DpvipInputError(f"selection seed {self.seed} must be a non-negative integer")

    def record(self) -> dict:
        """What a result records of it (test mode: the mode and its label)."""
        if self.validating:
            return {"mode": self.mode, "fraction": self.fraction, "seed": self.seed, "stratified": self.stratified}
        return {"mode": self.mode, "label": TEST_LABEL}


TEST = Selection("test")


def held_out_count(examples: int, fraction: float) -> int:
    """Examples held out of `examples` for validation: ceil(fraction * n), at least one and
    leaving at least one to train on."""
    if not 0 < fraction < 1:
        raise DpvipInputError(f"validation fraction {fraction} is outside (0, 1)")
    held = math.ceil(fraction * examples - 1e-9)
    if held < 1 or held >= examples:
        raise DpvipInputError(
            f"a validation fraction of {fraction:g} of {examples} training examples holds out {held}: "
            "at least one must be held out and one left to train on"
        )
    return held


def validation_split(labels, fraction: float, seed: int, stratified: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(kept, held): sorted positions of the examples left to train on and of the
    ceil(fraction * n) held out for validation, disjoint and covering 0..n-1; the same for
    the same labels, fraction and seed. `stratified`: each class holds out its share of the
    total (largest remainders; ties to the smaller class label); otherwise a uniform cut
    that reads no label."""
    labels = np.asarray(labels)
    examples = len(labels)
    held_total = held_out_count(examples, fraction)
    rng = np.random.default_rng(seed)
    if not stratified:
        held = rng.permutation(examples)[:held_total]
    else:
        classes, counts = np.unique(labels, return_counts=True)
        quota = held_total * counts / examples
        take = np.floor(quota).astype(np.int64)
        extra = held_total - int(take.sum())
        take[np.argsort(-(quota - take), kind="stable")[:extra]] += 1
        held = np.concatenate(
            [rng.permutation(np.flatnonzero(labels == label))[:count] for label, count in zip(classes, take)]
        )
    mask = np.zeros(examples, dtype=bool)
    mask[held] = True
    return np.flatnonzero(~mask), np.flatnonzero(mask)


def best(scores: Mapping[Hashable, float]) -> Hashable:
    """The grid point with the highest score (the first in grid order on a tie)."""
    if not scores:
        raise DpvipInputError("no grid point to choose from")
    return max(scores, key=scores.get)


def selection_note(record: Mapping | None, what: str = "hyper-parameter") -> str:
    """How `what` was chosen, from a result's selection record (None: an older result, which
    picked on test accuracy)."""
    record = dict(record or {"mode": "test"})
    if record.get("mode") == "validation":
        how = "stratified by class" if record.get("stratified", True) else "uniformly at random (no label read)"
        return (
            f"{what} picked on validation accuracy: {record['fraction']:.0%} of the training split held out "
            f"({how}, seed {record['seed']}), every grid point trained on the rest; the value shown is the chosen "
            "point's test accuracy"
        )
    return f"{what} {TEST_LABEL}"
