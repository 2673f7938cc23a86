"""Verdicts on the papers' qualitative claims, calibrated so that they do not flip between
runs: `held`, `not held`, `inconclusive`, `unstable`, `mixed`, `uninformative` or `not tested`.

A claim compares groups of independent runs (seeds with fresh keys): each `Group` holds one
value per run and, for an accuracy, the size of the test set it was measured on. The claim is
one or more linear contrasts of the group means (e.g. better - worse; a difference of
differences), each positive when the claim holds; a claim of several contrasts (StyleGAN-
Oriented beats each other set) holds when all of them do.

The interval of a contrast is a Welch t-interval on the run means with the test set's
binomial variance added. The variance of a group's mean is the between-run sample variance
over its runs, divided by their number, plus p (1 - p) / n for its test set of n (Agresti-
Coull p, so a group at 0% or 100% still has noise); the degrees of freedom are Welch-
Satterthwaite's, in which the binomial terms count as known. Why this and not a bootstrap:
with 3 runs a percentile bootstrap of the runs underestimates their variance by a third and
its distribution is coarse; with 1 run it sees the test-set noise only, while the run-to-run
spread of DP training is the larger part (4.66 points against 1.99 in our DP-RandP runs).
Adding the binomial term for groups measured on the same test set is conservative (their
test-set noise partly cancels in a difference). The calibration test (tests/report/
test_verdict_calibration.py) simulates claims at our measured noise: the interval covers the
true effect >= 93% of the time at 3 runs, and a null effect is called held <= 2.5%.

Verdicts, in the order they are checked:
- `not tested`: a group has no result in this configuration (the reason is given).
- `uninformative`: an arm the claim says is better sits within noise (two standard errors of
  its mean) of chance, or one it says is worse within noise of 100%: the comparison cannot
  show the claim there.
- `inconclusive (k runs)`: a group has fewer than MIN_RUNS runs (a `fixed` group, one given
  model the claim starts from such as (Syn)-ViP, has no run-to-run spread and needs none). Its interval is still shown,
  with the between-run SD of a run-to-run reference (REFERENCE_RUN_SD) for a one-run
  accuracy group; a value that is not an accuracy (a final loss) gets no interval from a
  single run.
- `held` / `not held` / `inconclusive`: every contrast's 95% interval above 0 / one
  contrast's interval below 0 (Bonferroni-corrected over the contrasts) / otherwise.
- `unstable`: a decisive verdict changes when any one run is left out of any group.
Claims whose parts are separate settings (one model, then another) combine with `across`:
parts that point opposite ways, one of them decisively, make the claim `mixed`.

Power: each verdict states the minimum detectable effect (two-sided 5%, 80% power) at its
runs and test size, and how many runs per group would detect the paper's own effect.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTED = "held", "not held", "inconclusive", "not tested"
UNSTABLE, MIXED, UNINFORMATIVE = "unstable", "mixed", "uninformative"
VERDICTS = (HELD, NOT_HELD, UNSTABLE, MIXED, UNINFORMATIVE, INCONCLUSIVE, NOT_TESTED)
DECISIVE = (HELD, NOT_HELD)
CONFIDENCE, POWER = 0.95, 0.80
MIN_RUNS = 3  # a decisive verdict needs this many independent runs in every group
MAX_RUNS = 50  # the most runs per group the power column searches
# The between-seed SD of test accuracy (points) pooled over our eight 3-seed DP-RandP groups
# of the embedded config (16 degrees of freedom): the run-to-run spread assumed for a group
# of one run, which cannot show its own.
REFERENCE_RUN_SD, REFERENCE_DF = 4.66, 16
STANDARD_ERRORS = 2  # how close to chance or 100% an arm may sit before it is uninformative

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

    @classmethod
    def of(cls, values, test_examples: int | None = None, chance: float | None = None, fixed: bool = False) -> Group:
        kept = tuple(float(v) for v in values if v is not None and not math.isnan(float(v)))
        return cls(kept, test_examples, chance, fixed=fixed)

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
        n = self.test_examples
        p = (self.mean / 100 * n + 2) / (n + 4)  # Agresti-Coull
        return 1e4 * p * (1 - p) / (n + 4)

    def run_variance(self, runs: int | None = None) -> tuple[float, float]:
        """(variance of the mean over `runs` runs from the between-run spread, its degrees of
        freedom): the sample variance with 2+ runs, the reference for one accuracy run."""
        if self.fixed:
            return 0.0, math.inf
        runs = runs or self.runs
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

    def without(self, index: int) -> Group:
        """The group less one run, its spread still estimated from all of them: leaving a run
        out asks whether the verdict rests on that run, not how it fares with less data."""
        return replace(self, values=self.values[:index] + self.values[index + 1 :], spread=self.spread or self.values)


@dataclass(frozen=True)
class Interval:
    estimate: float
    standard_error: float
    df: float

    def bounds(self, confidence: float) -> tuple[float, float]:
        if math.isnan(self.standard_error):
            return math.nan, math.nan
        half = _t(1 - (1 - confidence) / 2, self.df) * self.standard_error
        return self.estimate - half, self.estimate + half

    @property
    def detectable(self) -> float:
        """The smallest effect this design detects with POWER at two-sided 1 - CONFIDENCE."""
        return (_t(1 - (1 - CONFIDENCE) / 2, self.df) + _t(POWER, self.df)) * self.standard_error


def _t(q: float, df: float) -> float:
    return float(stats.norm.ppf(q)) if not math.isfinite(df) else float(stats.t.ppf(q, df))


def contrast_interval(groups: Mapping[str, Group], contrast: Contrast, runs: int | None = None) -> Interval:
    """The contrast's estimate with its standard error and Welch-Satterthwaite degrees of
    freedom; `runs`: as if every group had that many runs (for the power column)."""
    estimate = sum(c * groups[name].mean for name, c in contrast.items())
    total, welch = 0.0, 0.0
    for name, c in contrast.items():
        variance, df = groups[name].run_variance(runs)
        if runs and len(groups[name].spread or groups[name].values) < 2 and math.isfinite(df):
            df = float(runs - 1)  # the reference spread, as if measured on that many runs
        total += c * c * (variance + groups[name].test_variance())
        if variance > 0:
            welch += (c * c * variance) ** 2 / df
    if math.isnan(total):
        return Interval(estimate, math.nan, math.nan)
    df = total**2 / welch if welch > 0 else math.inf
    return Interval(estimate, math.sqrt(total), df)


@dataclass(frozen=True)
class Verdict:
    verdict: str
    estimate: float = math.nan
    low: float = math.nan
    high: float = math.nan
    runs: str = ""  # runs per group, e.g. "3 / 3"
    reason: str = ""
    detectable: float = math.nan  # the minimum detectable effect at these runs and test size
    runs_needed: str = ""  # runs per group that detect the paper's effect with POWER
    detail: str = ""  # the interval as text, where it is not one (the parts of a claim)

    @property
    def interval(self) -> str:
        if self.detail:
            return self.detail
        if math.isnan(self.estimate):
            return ""
        if math.isnan(self.low):
            return f"{self.estimate:+.2f} (no interval from a single run)"
        return f"{self.estimate:+.2f} [{self.low:+.2f}, {self.high:+.2f}]"

    @property
    def decisive(self) -> bool:
        return self.verdict in DECISIVE


def _raw(groups: Mapping[str, Group], contrasts: Sequence[Contrast]) -> tuple[str, Interval, Contrast]:
    """The interval verdict alone (no guards), and the binding contrast with its interval: the
    one whose interval reaches lowest (the one that decides `held`), which the verdict shows."""
    intervals = [contrast_interval(groups, c) for c in contrasts]
    binding, contrast = min(
        zip(intervals, contrasts), key=lambda pair: (pair[0].bounds(CONFIDENCE)[0], pair[0].estimate)
    )
    if any(math.isnan(i.standard_error) for i in intervals):
        return INCONCLUSIVE, binding, contrast
    corrected = 1 - (1 - CONFIDENCE) / len(intervals)  # any one contrast below 0 refutes
    if any(i.bounds(corrected)[1] < 0 for i in intervals):
        return NOT_HELD, binding, contrast
    if all(i.bounds(CONFIDENCE)[0] > 0 for i in intervals):
        return HELD, binding, contrast
    return INCONCLUSIVE, binding, contrast


def _runs_needed(groups: Mapping[str, Group], contrast: Contrast, effect: float | None) -> str:
    if effect is None or not math.isfinite(effect):
        return "no paper effect"
    if effect == 0:
        return "the paper's effect is 0"
    if any(math.isnan(groups[name].run_variance()[1]) for name in contrast):
        return "unknown (no run-to-run spread)"
    for runs in range(MIN_RUNS, MAX_RUNS + 1):  # a decisive verdict needs MIN_RUNS whatever the power
        if contrast_interval(groups, contrast, runs).detectable <= abs(effect):
            return str(runs)
    # the test sets' variance does not shrink with more runs: past it, no number of runs helps
    test_only = math.sqrt(sum(c * c * groups[name].test_variance() for name, c in contrast.items()))
    if (_t(1 - (1 - CONFIDENCE) / 2, math.inf) + _t(POWER, math.inf)) * test_only >= abs(effect):
        sizes = sorted({groups[name].test_examples for name in contrast if groups[name].test_examples})
        return f"none: {' / '.join(f'{n:,}' for n in sizes)} test images are too few"
    return f"> {MAX_RUNS}"


def judge(
    groups: Mapping[str, Group],
    contrasts: Contrast | Sequence[Contrast],
    paper_effect: float | None = None,
) -> Verdict:
    """The verdict on "every contrast of the group means > 0", guarded and with its power.
    `paper_effect`: the paper's own value of the claim's statistic (in our units)."""
    contrasts = [contrasts] if isinstance(contrasts, Mapping) else list(contrasts)
    missing = [name for name, group in groups.items() if not group.values]
    if missing:
        return not_tested(f"no result for {', '.join(missing)} in this configuration")
    raw, binding, contrast = _raw(groups, contrasts)
    low, high = binding.bounds(CONFIDENCE)
    found = Verdict(
        raw,
        binding.estimate,
        low,
        high,
        " / ".join("fixed" if group.fixed else str(group.runs) for group in groups.values()),
        detectable=binding.detectable,
        runs_needed=_runs_needed(groups, contrast, paper_effect),
    )
    guard = _uninformative(groups, contrasts) or _too_few_runs(groups) or _unstable(groups, contrasts, raw)
    return replace(found, **guard) if guard else found


def _uninformative(groups: Mapping[str, Group], contrasts: Sequence[Contrast]) -> dict | None:
    """An arm the claim says is better (a positive coefficient) within noise of chance never
    learned, and one it says is worse within noise of 100% cannot be beaten: either way the
    comparison cannot show the claim. (A worse arm at chance or a better one at 100% can.)"""
    reasons = {}
    for contrast in contrasts:
        for name, coefficient in contrast.items():
            group = groups[name]
            if not group.is_accuracy:
                continue
            margin = STANDARD_ERRORS * group.noise()
            if coefficient > 0 and group.chance is not None and group.mean - group.chance <= margin:
                reasons[name] = f"{name} ({group.mean:.1f}) is within noise of chance ({group.chance:.3g}%)"
            elif coefficient < 0 and 100 - group.mean <= margin:
                reasons[name] = f"{name} ({group.mean:.1f}) is within noise of 100%"
    return {"verdict": UNINFORMATIVE, "reason": "; ".join(reasons.values())} if reasons else None


def _too_few_runs(groups: Mapping[str, Group]) -> dict | None:
    fewest = min((group.runs for group in groups.values() if not group.fixed), default=MIN_RUNS)
    if fewest >= MIN_RUNS:
        return None
    what = "single run" if fewest == 1 else f"{fewest} runs"
    extra = (
        f" (interval with the reference run-to-run SD {REFERENCE_RUN_SD} points)"
        if fewest == 1 and all(g.is_accuracy for g in groups.values() if not g.fixed)
        else ""
    )
    return {
        "verdict": INCONCLUSIVE,
        "reason": f"inconclusive ({what}): a decisive verdict needs {MIN_RUNS} runs per group{extra}",
    }


def _unstable(groups: Mapping[str, Group], contrasts: Sequence[Contrast], verdict: str) -> dict | None:
    """Leave each run of each group out in turn: a decisive verdict that changes is unstable
    (an inconclusive one claims nothing that one run could overturn)."""
    if verdict not in DECISIVE:
        return None
    changed = []
    for name, group in groups.items():
        for index in range(0 if group.fixed else group.runs):
            left = _raw({**groups, name: group.without(index)}, contrasts)[0]
            if left != verdict:
                changed.append(f"without {name} run {index + 1}: {left}")
    if not changed:
        return None
    return {"verdict": UNSTABLE, "reason": f"{verdict} on all runs, but " + "; ".join(changed)}


def not_tested(reason: str) -> Verdict:
    return Verdict(NOT_TESTED, reason=reason)


def across(parts: Mapping[str, Verdict]) -> Verdict:
    """A claim made for several settings (one model, then another): held when it holds in
    each, not held when it fails in one and no other points the other way, `mixed` when one
    part is decisive and another points the other way; else the first part that is not held.
    """
    named = list(parts.items())
    detail = "; ".join(f"{name}: {v.interval or v.verdict}" for name, v in named)
    runs = "; ".join(f"{name}: {v.runs}" for name, v in named if v.runs)
    for name, part in named:
        if part.verdict == NOT_TESTED:
            return replace(part, reason=f"{name}: {part.reason}")
    signs = {
        name: math.copysign(1, v.estimate)
        for name, v in named
        if not math.isnan(v.estimate) and v.verdict != UNINFORMATIVE  # an uninformative part points nowhere
    }
    decisive = [name for name, v in named if v.decisive]
    if decisive and len(set(signs.values())) > 1:
        reason = "; ".join(
            f"{name} points {'for' if signs[name] > 0 else 'against'} ({parts[name].verdict})" for name in signs
        )
        return Verdict(MIXED, runs=runs, reason=f"the parts disagree: {reason}", detail=detail)
    if all(v.verdict == HELD for _, v in named):
        return replace(named[0][1], runs=runs, detail=detail, reason="")
    first = next((v for _, v in named if v.verdict == NOT_HELD), None) or next(v for _, v in named if v.verdict != HELD)
    reason = "; ".join(f"{name}: {v.verdict}" + (f" ({v.reason})" if v.reason else "") for name, v in named)
    return replace(first, runs=runs, detail=detail, reason=reason)
