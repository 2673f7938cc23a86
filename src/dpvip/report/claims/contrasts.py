"""The statistics under the verdicts (dpvip.report.claims.verdicts): a `Group` of independent runs
(one value per run, the test set behind an accuracy, its per-example correctness where kept)
and the interval of a linear contrast of group means: a Welch t-interval on the run means
with the test set's variance added, binomial per group, or from the per-example differences
when the groups are paired on one test set.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from dpvip.per_example import read_correctness

CONFIDENCE, POWER = 0.95, 0.80
# The between-seed SD of test accuracy (points) pooled over our eight 3-seed DP-RandP groups
# of the embedded config (16 degrees of freedom): the run-to-run spread assumed for a group
# of one run, which cannot show its own.
REFERENCE_RUN_SD, REFERENCE_DF = 4.66, 16

Contrast = Mapping[str, float]  # {group: coefficient}


@dataclass(frozen=True)
class Group:
    """One side of a comparison: a value per independent run (accuracies in %, or another
    measure such as a final training loss)."""

    values: tuple[float, ...]
    test_examples: int | None = None  # the test set behind each accuracy (None: not an accuracy)
    chance: float | None = None  # the task's chance accuracy (%), where known
    spread: tuple[float, ...] | None = None  # the runs the between-run variance comes from (default: values)
    fixed: bool = False  # one given model the claim starts from (not a sample of runs): test-set noise only
    # Each run's per-example correctness (0/1 per test example, in the test set's order) and the
    # test set's identity: groups of one contrast that all carry them on one set are paired.
    correct: tuple[np.ndarray, ...] | None = None
    test_set: str | None = None
    may_sit_at_chance: bool = False  # the claim says this arm falls to chance: the guard leaves it be
    label: str = ""  # how reasons name the group (default: its key in the claim)

    @classmethod
    def of(
        cls,
        values,
        test_examples: int | None = None,
        chance: float | None = None,
        fixed: bool = False,
        correct=None,
        test_set: str | None = None,
        **options,
    ) -> Group:
        """Runs with no value (None, NaN) are left out, with their correctness. `correct`: one
        0/1 sequence per run (or None for a run that kept none: then the group is unpaired)."""
        values = list(values)
        correct = list(correct) if correct is not None else [None] * len(values)
        if len(correct) != len(values):
            raise ValueError(f"{len(values)} values but {len(correct)} correctness records")
        kept = [(float(v), c) for v, c in zip(values, correct) if v is not None and not math.isnan(float(v))]
        flags = [c for _, c in kept]
        paired = bool(kept) and test_set is not None and all(c is not None for c in flags)
        return cls(
            tuple(v for v, _ in kept),
            test_examples,
            chance,
            fixed=fixed,
            correct=tuple(np.asarray(c, dtype=np.float64) for c in flags) if paired else None,
            test_set=test_set if paired else None,
            **options,
        )

    def name(self, key: str) -> str:
        return self.label or key

    @property
    def runs(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return float(np.mean(self.values)) if self.values else math.nan

    @property
    def is_accuracy(self) -> bool:
        return bool(self.test_examples)

    def test_variance(self) -> float:
        """The binomial variance of the mean's test-set proportion (points^2; 0 for a value
        that is not an accuracy)."""
        if not self.is_accuracy:
            return 0.0
        return binomial_variance(self.mean, self.test_examples)

    def run_variance(self, runs: int | None = None) -> tuple[float, float]:
        """(variance of the mean over `runs` runs from the between-run spread, its degrees of
        freedom): the sample variance with 2+ runs, the reference for one accuracy run. A
        fixed group has none, unless it is given a `spread`: one given model whose evaluation
        is itself noisy (a dense fine-tune), its one run as variable as the runs of `spread`."""
        if self.fixed and self.spread is None:
            return 0.0, math.inf
        runs = self.runs if self.fixed else (runs or self.runs)
        spread = self.spread or self.values
        if len(spread) >= 2:
            return float(np.var(spread, ddof=1)) / runs, float(len(spread) - 1)
        if self.is_accuracy:
            return REFERENCE_RUN_SD**2 / runs, float(REFERENCE_DF)
        return math.nan, math.nan

    def noise(self) -> float:
        """Standard error of the mean, between-run spread (when seen) and test set."""
        between = float(np.var(self.values, ddof=1)) / self.runs if self.runs >= 2 else 0.0
        return math.sqrt(between + self.test_variance())

    def per_example(self) -> np.ndarray:
        """The mean correctness (%) of each test example over the group's runs (paired groups)."""
        return 100.0 * np.mean(np.stack(self.correct), axis=0)

    def without(self, index: int) -> Group:
        """The group less one run, its spread still estimated from all of them: leaving a run
        out asks whether the verdict rests on that run, not how it fares with less data."""
        correct = self.correct[:index] + self.correct[index + 1 :] if self.correct else None
        return replace(
            self,
            values=self.values[:index] + self.values[index + 1 :],
            spread=self.spread or self.values,
            correct=correct,
        )


def paired_runs(records) -> dict:
    """`Group.of`'s keyword arguments for its runs' per-example records (dpvip.per_example, one
    per value, in order): their correctness and the test set they share. Empty (the group is
    unpaired) when a run kept none or the runs were scored on different sets."""
    read = [read_correctness(record) for record in records]
    if not read or any(r is None for r in read) or len({test_set for _, test_set in read}) != 1:
        return {}
    return {"correct": [correct for correct, _ in read], "test_set": read[0][1]}


def binomial_variance(percent: float, n: int) -> float:
    """The variance (points^2) of a proportion measured on n examples, at Agresti-Coull's p (so
    that a proportion at 0% or 100% still has noise)."""
    p = (percent / 100 * n + 2) / (n + 4)
    return 1e4 * p * (1 - p) / (n + 4)


def paired_test_variance(groups: Mapping[str, Group], contrast: Contrast) -> float | None:
    """The test-set variance of the contrast from its per-example values, when every group in it
    carries per-example correctness on one test set (else None: the groups are unpaired). It is
    never below the binomial variance of one arm at 0% (the floor the unpaired form has)."""
    members = [(groups[name], c) for name, c in contrast.items() if c]
    sets = {group.test_set for group, _ in members}
    if len(sets) != 1 or None in sets or any(group.correct is None for group, _ in members):
        return None
    lengths = {len(run) for group, _ in members for run in group.correct}
    if len(lengths) != 1:
        return None
    n = lengths.pop()
    differences = sum(c * group.per_example() for group, c in members)
    floor = sum(c * c for _, c in members) * binomial_variance(0.0, n)
    return max(float(np.var(differences, ddof=1)) / n if n > 1 else math.inf, floor)


@dataclass(frozen=True)
class Interval:
    estimate: float
    standard_error: float
    df: float

    def bounds(self, confidence: float) -> tuple[float, float]:
        if math.isnan(self.standard_error):
            return math.nan, math.nan
        half = t_quantile(1 - (1 - confidence) / 2, self.df) * self.standard_error
        return self.estimate - half, self.estimate + half

    @property
    def detectable(self) -> float:
        """The smallest effect this design detects with POWER at two-sided 1 - CONFIDENCE."""
        return (t_quantile(1 - (1 - CONFIDENCE) / 2, self.df) + t_quantile(POWER, self.df)) * self.standard_error


def t_quantile(q: float, df: float) -> float:
    return float(stats.norm.ppf(q)) if not math.isfinite(df) else float(stats.t.ppf(q, df))


def contrast_interval(groups: Mapping[str, Group], contrast: Contrast, runs: int | None = None) -> Interval:
    """The contrast's estimate with its standard error and Welch-Satterthwaite degrees of
    freedom; `runs`: as if every group had that many runs (for the power column)."""
    estimate = sum(c * groups[name].mean for name, c in contrast.items())
    paired = paired_test_variance(groups, contrast)
    total = paired if paired is not None else sum(c * c * groups[name].test_variance() for name, c in contrast.items())
    # Groups whose variance comes from the same runs (a fixed group given another's spread)
    # share one estimate: their terms are summed before Welch-Satterthwaite, not counted as
    # independent. (Two groups whose runs happen to be equal are merged too: fewer degrees of
    # freedom, the conservative side.)
    terms: dict[tuple, list[float]] = {}
    for name, c in contrast.items():
        group = groups[name]
        variance, df = group.run_variance(runs)
        if runs and len(group.spread or group.values) < 2 and math.isfinite(df):
            df = float(runs - 1)  # the reference spread, as if measured on that many runs
        total += c * c * variance
        if variance > 0:
            term = terms.setdefault(group.spread or group.values, [0.0, df])
            term[0] += c * c * variance
    welch = sum(variance**2 / df for variance, df in terms.values())
    if math.isnan(total):
        return Interval(estimate, math.nan, math.nan)
    df = total**2 / welch if welch > 0 else math.inf
    return Interval(estimate, math.sqrt(total), df)
