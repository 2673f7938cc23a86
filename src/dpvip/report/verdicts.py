"""Verdicts on the papers' qualitative claims: `held`, `not held` or `inconclusive`, from a
bootstrap confidence interval of the claim's statistic on our runs.

A claim compares groups of runs (e.g. ViP against (Syn)-ViP; DP-RandP's warm runs against
its cold ones at epsilon 1): each `Group` holds one value per seed and, for an accuracy, the
size of the test set it was measured on. Its statistic is a function of the groups' means
that is positive when the claim holds (a difference, or a difference of differences).

The interval is a two-level bootstrap (10,000 resamples, percentile, 95%): in each resample
every group draws its seeds with replacement, and each drawn accuracy is redrawn as a
binomial proportion of its test set. It thus carries both the seed-to-seed spread and the
test-set noise; with one seed it is the test-set noise alone (it cannot see training noise),
which the table says. Values that are not accuracies (a final training loss) have no test
set: their groups resample what they are given (the last logged steps of a run).

`held` when the whole interval is above 0, `not held` when it is below, `inconclusive` when
it contains 0. `not tested` is for claims our runs cannot speak to, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTED = "held", "not held", "inconclusive", "not tested"
VERDICTS = (HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTED)
RESAMPLES, CONFIDENCE = 10_000, 0.95


@dataclass(frozen=True)
class Group:
    """One side of a comparison: a value per seed (accuracies in %, or any other measure)."""

    values: tuple[float, ...]
    test_examples: int | None = None  # the test set behind each accuracy (None: not an accuracy)

    @classmethod
    def of(cls, values, test_examples: int | None = None) -> Group:
        kept = tuple(float(v) for v in values if v is not None and not math.isnan(float(v)))
        return cls(kept, test_examples)

    @property
    def mean(self) -> float:
        return float(np.mean(self.values)) if self.values else math.nan

    def resampled_means(self, rng: np.random.Generator, resamples: int) -> np.ndarray:
        values = np.asarray(self.values, dtype=float)
        drawn = values[rng.integers(0, len(values), size=(resamples, len(values)))]
        if self.test_examples:
            n = self.test_examples
            drawn = rng.binomial(n, np.clip(drawn / 100.0, 0.0, 1.0)) / n * 100.0
        return drawn.mean(axis=1)


@dataclass(frozen=True)
class Verdict:
    verdict: str
    estimate: float = math.nan
    low: float = math.nan
    high: float = math.nan
    seeds: str = ""  # e.g. "3 / 3" seeds per group
    reason: str = ""

    @property
    def interval(self) -> str:
        if math.isnan(self.low):
            return ""
        return f"{self.estimate:+.2f} [{self.low:+.2f}, {self.high:+.2f}]"


Statistic = Callable[[Mapping[str, float]], float]


def judge(
    groups: Mapping[str, Group],
    statistic: Statistic,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Verdict:
    """The verdict on "statistic(group means) > 0" with its bootstrap interval. A group with
    no value makes the claim `not tested` (its runs are not in this configuration)."""
    missing = [name for name, group in groups.items() if not group.values]
    if missing:
        return Verdict(NOT_TESTED, reason=f"no result for {', '.join(missing)} in this configuration")
    rng = np.random.default_rng(seed)  # the report is deterministic; the runs' noise is theirs
    means = {name: group.resampled_means(rng, resamples) for name, group in groups.items()}
    estimate = statistic({name: group.mean for name, group in groups.items()})
    samples = np.asarray(statistic(means), dtype=float)
    tail = (1 - confidence) / 2 * 100
    low, high = (float(v) for v in np.percentile(samples, [tail, 100 - tail]))
    verdict = HELD if low > 0 else NOT_HELD if high < 0 else INCONCLUSIVE
    seeds = " / ".join(str(len(group.values)) for group in groups.values())
    return Verdict(verdict, float(estimate), low, high, seeds)


def not_tested(reason: str) -> Verdict:
    return Verdict(NOT_TESTED, reason=reason)


def both(first: Verdict, second: Verdict) -> Verdict:
    """A claim of two parts: not held if either is not; else not tested or inconclusive if
    either is; held if both are."""
    for verdict in (NOT_HELD, NOT_TESTED, INCONCLUSIVE):
        worst = next((v for v in (first, second) if v.verdict == verdict), None)
        if worst is not None:
            return worst
    return first
