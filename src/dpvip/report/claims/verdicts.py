"""Verdicts on the papers' qualitative claims, calibrated so that they do not flip between
runs: `held`, `not held`, `inconclusive`, `unstable`, `mixed`, `uninformative` or `not tested`.

A claim compares groups of independent runs (seeds with fresh keys): each `Group` holds one
value per run and, for an accuracy, the size of the test set it was measured on. The claim is
one or more linear contrasts of the group means (e.g. better - worse; a difference of
differences), each positive when the claim holds; a claim of several contrasts (StyleGAN-
Oriented beats each other set) holds when all of them do.

The interval of a contrast is a Welch t-interval on the run means with the test set's
variance added. The variance of a group's mean is the between-run sample variance
over its runs, divided by their number, plus p (1 - p) / n for its test set of n (Agresti-
Coull p, so a group at 0% or 100% still has noise); the degrees of freedom are Welch-
Satterthwaite's, in which the binomial terms count as known. Why this and not a bootstrap:
with 3 runs a percentile bootstrap of the runs underestimates their variance by a third and
its distribution is coarse; with 1 run it sees the test-set noise only, while the run-to-run
spread of DP training is the larger part (4.66 points against 1.99 in our DP-RandP runs).
Paired arms: when every group of a contrast carries each run's per-example correctness on one
test set (`correct`, `test_set`), the test-set term is the variance of the per-example
contrast instead: d_i = sum_g c_g * (group g's mean correctness on example i), var(d) / n. Arms
scored on the same images share that image's difficulty, which cancels in their difference;
adding their binomial variances overstates the contrast's noise (about 2x its SD at 360
images). The calibration test (tests/report/claims/test_verdict_calibration.py) simulates claims at
our measured noise, paired and unpaired: the interval covers the true effect >= 93% of the
time at 3 runs, and a null effect is called held <= 2.5%.

Verdicts, in the order they are checked:
- `not tested`: a group has no result in this configuration (the reason is given).
- `uninformative`: an arm sits within noise (two standard errors of its mean) of chance or of
  100%, whichever side of the claim it is on: an arm that never learned (or cannot be
  beaten) shows nothing about the claim either way. A one-sided guard (only a better arm at
  chance) is biased towards `held`: when arms sometimes fail to learn, a worse arm that failed
  makes a false `held` (16% of equal-arm claims with a 0.2 failure rate per arm). Only an arm
  the claim itself says falls to chance (`may_sit_at_chance`) is exempt. A dense score (COCO
  AP, ADE20K mIoU) has the trivial predictor's score as its chance (every box the whole
  image; every pixel the most frequent class): two detectors that learnt nothing compare
  nothing.
- `inconclusive (k runs)`: a group has fewer than MIN_RUNS runs (a `fixed` group, one given
  model the claim starts from such as (Syn)-ViP, has no run-to-run spread and needs none). Its interval is still shown,
  with the between-run SD of a run-to-run reference (REFERENCE_RUN_SD) for a one-run
  accuracy group; a value that is not an accuracy (a final loss) gets no interval from a
  single run.
- `held` / `not held` / `inconclusive`: every contrast's 95% interval above 0 / one
  contrast's interval below 0 (Bonferroni-corrected over the contrasts) / otherwise.
- `unstable`: a decisive verdict changes when any one run is left out of any group.
Claims whose parts are separate settings (one model, then another) combine with `across`:
a part held and another not held make the claim `mixed`.

Claims of no difference (`judge_equivalence`): two one-sided tests (TOST) against a stated
margin: `equivalent` when the 90% interval lies inside (-margin, +margin), `not held` when the
95% interval lies wholly outside it, `not shown equivalent` otherwise; with the same guards.

Power: each verdict states the minimum detectable effect (two-sided 5%, 80% power) at its
runs and test size, and how many runs per group would detect the paper's own effect.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from dpvip.report.claims.contrasts import (
    CONFIDENCE,
    POWER,
    REFERENCE_RUN_SD,
    Contrast,
    Group,
    Interval,
    t_quantile,
    contrast_interval,
    paired_test_variance,
)

HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTED = "held", "not held", "inconclusive", "not tested"
UNSTABLE, MIXED, UNINFORMATIVE = "unstable", "mixed", "uninformative"
EQUIVALENT, NOT_SHOWN_EQUIVALENT = "equivalent", "not shown equivalent"
VERDICTS = (HELD, EQUIVALENT, NOT_HELD, UNSTABLE, MIXED, UNINFORMATIVE, INCONCLUSIVE, NOT_SHOWN_EQUIVALENT, NOT_TESTED)
DECISIVE = (HELD, EQUIVALENT, NOT_HELD)
MIN_RUNS = 3  # a decisive verdict needs this many independent runs in every group
MAX_RUNS = 50  # the most runs per group the power column searches
STANDARD_ERRORS = 2  # how close to chance or 100% an arm may sit before it is uninformative


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
    paired = paired_test_variance(groups, contrast)
    test_only = math.sqrt(
        paired if paired is not None else sum(c * c * groups[name].test_variance() for name, c in contrast.items())
    )
    if (t_quantile(1 - (1 - CONFIDENCE) / 2, math.inf) + t_quantile(POWER, math.inf)) * test_only >= abs(effect):
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
    found = Verdict(
        raw,
        binding.estimate,
        *binding.bounds(CONFIDENCE),
        _runs_label(groups),
        reason=_why(raw, len(contrasts), binding),
        detectable=binding.detectable,
        runs_needed=_runs_needed(groups, contrast, paper_effect),
    )
    return _guarded(found, groups, contrasts, lambda changed: _raw(changed, contrasts)[0])


def _runs_label(groups: Mapping[str, Group]) -> str:
    return " / ".join("fixed" if group.fixed else str(group.runs) for group in groups.values())


def _guarded(found: Verdict, groups: Mapping[str, Group], contrasts: Sequence[Contrast], decide) -> Verdict:
    """`found` unless a guard applies (uninformative, too few runs, unstable); `decide`:
    groups -> the unguarded verdict, for the leave-one-out check."""
    guard = _uninformative(groups, contrasts) or _too_few_runs(groups) or _unstable(groups, decide, found.verdict)
    return replace(found, **guard) if guard else found


def _why(verdict: str, contrasts: int, binding: Interval) -> str:
    """The reason of an unguarded verdict, in words."""
    which = "every contrast's" if contrasts > 1 else "the"
    if verdict == HELD:
        return f"{which} {CONFIDENCE:.0%} interval lies above 0"
    if verdict == NOT_HELD:
        return (
            "a contrast's Bonferroni-corrected interval lies below 0"
            if contrasts > 1
            else (f"the {CONFIDENCE:.0%} interval lies below 0")
        )
    if math.isnan(binding.standard_error):
        return "no interval: a single run of a value with no test set"
    found = f"an effect of {binding.detectable:.1f} would be found with {POWER:.0%} power"
    return f"the {CONFIDENCE:.0%} interval contains 0; {found}"


def _uninformative(groups: Mapping[str, Group], contrasts: Sequence[Contrast]) -> dict | None:
    """An arm within noise of chance never learned, and one within noise of 100% cannot be told
    from another there: on either side of the claim, the comparison cannot show it (the guard is
    two-sided so that arms that fail to learn bias neither `held` nor `not held`). An arm the
    claim itself says falls to chance (`may_sit_at_chance`) is left be."""
    reasons = {}
    for contrast in contrasts:
        for name, coefficient in contrast.items():
            group = groups[name]
            # accuracies, and scores with a trivial predictor's level as their chance (COCO AP, mIoU)
            if not (coefficient and (group.is_accuracy or group.chance is not None)):
                continue
            margin = STANDARD_ERRORS * group.noise()
            shown = group.name(name)
            at_chance = group.chance is not None and group.mean - group.chance <= margin
            if at_chance and not group.may_sit_at_chance:
                unit = "%" if group.is_accuracy else " points"
                reasons[name] = (
                    f"{shown} ({group.mean:.1f}) is within noise of {_chance_name(group)} ({group.chance:.3g}{unit})"
                )
            elif 100 - group.mean <= margin:
                reasons[name] = f"{shown} ({group.mean:.1f}) is within noise of 100%"
    return {"verdict": UNINFORMATIVE, "reason": "; ".join(reasons.values())} if reasons else None


def _chance_name(group: Group) -> str:
    """An accuracy's chance; a dense score's (AP, mIoU) is the trivial predictor's."""
    return "chance" if group.is_accuracy else "the trivial predictor's score"


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


def _unstable(groups: Mapping[str, Group], decide, verdict: str) -> dict | None:
    """Leave each run of each group out in turn: a decisive verdict that changes is unstable
    (an inconclusive one claims nothing that one run could overturn). `decide`: groups -> the
    unguarded verdict."""
    if verdict not in DECISIVE:
        return None
    changed = []
    for name, group in groups.items():
        for index in range(0 if group.fixed else group.runs):
            left = decide({**groups, name: group.without(index)})
            if left != verdict:
                changed.append(f"without {group.name(name)} run {index + 1}: {left}")
    if not changed:
        return None
    return {"verdict": UNSTABLE, "reason": f"{verdict} on all runs, but " + "; ".join(changed)}


def not_tested(reason: str) -> Verdict:
    return Verdict(NOT_TESTED, reason=reason)


def across(parts: Mapping[str, Verdict]) -> Verdict:
    """A claim made for several settings (one model, then another): held when it holds in
    each; `mixed` when one part is held and another not held; not held when a part is not held
    and none is held; else the first part that is not held (inconclusive, uninformative, ...).
    """
    named = list(parts.items())
    detail = "; ".join(f"{name}: {v.interval or v.verdict}" for name, v in named)
    runs = "; ".join(f"{name}: {v.runs}" for name, v in named if v.runs)
    for name, part in named:
        if part.verdict == NOT_TESTED:
            return replace(part, reason=f"{name}: {part.reason}")
    held = [name for name, v in named if v.verdict in (HELD, EQUIVALENT)]
    refuted = [name for name, v in named if v.verdict == NOT_HELD]
    if held and refuted:
        reason = f"held for {', '.join(held)}, not held for {', '.join(refuted)}"
        return Verdict(MIXED, runs=runs, reason=f"the parts disagree: {reason}", detail=detail)
    if len(held) == len(named):
        return replace(named[0][1], runs=runs, detail=detail, reason="")
    first = parts[refuted[0]] if refuted else next(v for _, v in named if v.verdict not in (HELD, EQUIVALENT))
    reason = "; ".join(f"{name}: {v.verdict}" + (f" ({v.reason})" if v.reason else "") for name, v in named)
    return replace(first, runs=runs, detail=detail, reason=reason)


def judge_equivalence(groups: Mapping[str, Group], contrast: Contrast, margin: float) -> Verdict:
    """A claim of no difference, tested as equivalence within +-`margin` (TOST, two one-sided
    tests at 1 - CONFIDENCE each): `equivalent` when the (2 CONFIDENCE - 1) interval of the
    contrast lies inside (-margin, margin), `not held` when its CONFIDENCE interval lies wholly
    outside, else `not shown equivalent`. The guards are those of `judge` (arms at chance are
    trivially alike: uninformative). `detectable` is the smallest margin this design shows with
    POWER when the true difference is 0."""
    if margin <= 0:
        raise ValueError(f"an equivalence margin must be positive, not {margin}")
    missing = [name for name, group in groups.items() if not group.values]
    if missing:
        return not_tested(f"no result for {', '.join(missing)} in this configuration")

    def decide(current: Mapping[str, Group]) -> tuple[str, Interval]:
        interval = contrast_interval(current, contrast)
        if math.isnan(interval.standard_error):
            return NOT_SHOWN_EQUIVALENT, interval
        low, high = interval.bounds(2 * CONFIDENCE - 1)
        outer_low, outer_high = interval.bounds(CONFIDENCE)
        if -margin < low and high < margin:
            return EQUIVALENT, interval
        if outer_low > margin or outer_high < -margin:
            return NOT_HELD, interval
        return NOT_SHOWN_EQUIVALENT, interval

    raw, interval = decide(groups)
    found = Verdict(
        raw,
        interval.estimate,
        *interval.bounds(2 * CONFIDENCE - 1),
        _runs_label(groups),
        reason=f"margin +-{margin:g}; interval at {2 * CONFIDENCE - 1:.0%} (two one-sided tests)",
        detectable=(t_quantile(CONFIDENCE, interval.df) + t_quantile(1 - (1 - POWER) / 2, interval.df))
        * interval.standard_error,
        runs_needed=_equivalence_runs(groups, contrast, margin),
    )
    return _guarded(found, groups, [contrast], lambda changed: decide(changed)[0])


def _equivalence_runs(groups: Mapping[str, Group], contrast: Contrast, margin: float) -> str:
    """Runs per group that show equivalence within the margin with POWER at a true difference 0."""
    if any(math.isnan(groups[name].run_variance()[1]) for name in contrast):
        return "unknown (no run-to-run spread)"
    for runs in range(MIN_RUNS, MAX_RUNS + 1):
        interval = contrast_interval(groups, contrast, runs)
        if (
            t_quantile(CONFIDENCE, interval.df) + t_quantile(1 - (1 - POWER) / 2, interval.df)
        ) * interval.standard_error <= margin:
            return str(runs)
    return f"> {MAX_RUNS}"
