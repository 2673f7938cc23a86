"""Calibration of the verdicts (dpvip.report.claims.verdicts) on simulated claims at the noise of our
own runs: each run's true accuracy spreads by the between-seed SD measured over our eight
3-seed DP-RandP groups (4.66 points), and is then measured on 360 test images (binomial).

At 3 runs per group the 95% interval must cover the true effect at least 93% of the time
over 1,000 simulated claims, and a null effect must be called held at most 2.5% of the time.
The procedure the verdicts used before (a two-level percentile bootstrap: runs resampled,
then each accuracy redrawn as a binomial proportion) fails the same test: it is kept here,
and only here, as the reference that shows it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from dpvip.report.claims.verdicts import (
    CONFIDENCE,
    HELD,
    NOT_HELD,
    REFERENCE_RUN_SD,
    UNSTABLE,
    Group,
    contrast_interval,
    judge,
)

SIMULATIONS, TEST_IMAGES, RUNS = 1_000, 360, 3
DIFFERENCE = {"better": 1.0, "worse": -1.0}


def simulated_runs(rng, truth: float, runs: int) -> np.ndarray:
    """`runs` accuracies (%) of a group whose expected accuracy is `truth`."""
    per_run = np.clip(rng.normal(truth, REFERENCE_RUN_SD, size=runs), 0, 100)
    return rng.binomial(TEST_IMAGES, per_run / 100) / TEST_IMAGES * 100


def simulate(effect: float, runs: int = RUNS, seed: int = 0):
    """SIMULATIONS claims "better - worse > 0" around 40% accuracy (no floor or ceiling)."""
    rng = np.random.default_rng(seed)
    for _ in range(SIMULATIONS):
        yield simulated_runs(rng, 40 + effect, runs), simulated_runs(rng, 40, runs)


def groups_of(better, worse) -> dict[str, Group]:
    return {"better": Group.of(better, TEST_IMAGES), "worse": Group.of(worse, TEST_IMAGES)}


def new_coverage(effect: float, runs: int = RUNS) -> float:
    covered = 0
    for better, worse in simulate(effect, runs):
        low, high = contrast_interval(groups_of(better, worse), DIFFERENCE).bounds(CONFIDENCE)
        covered += low <= effect <= high
    return covered / SIMULATIONS


def old_interval(rng, better, worse, resamples: int = 2_000) -> tuple[float, float]:
    """The former procedure: percentile interval of a two-level bootstrap."""

    def resampled_means(values):
        drawn = values[rng.integers(0, len(values), size=(resamples, len(values)))]
        return (rng.binomial(TEST_IMAGES, drawn / 100) / TEST_IMAGES * 100).mean(axis=1)

    samples = resampled_means(better) - resampled_means(worse)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def old_coverage(effect: float, runs: int = RUNS) -> float:
    rng = np.random.default_rng(1)
    hits = [low <= effect <= high for low, high in (old_interval(rng, b, w) for b, w in simulate(effect, runs))]
    return float(np.mean(hits))


@pytest.mark.parametrize("effect", [0.0, 8.0])
def test_the_interval_covers_the_true_effect_at_three_runs(effect):
    coverage = new_coverage(effect)
    assert coverage >= 0.93, coverage


def test_a_null_effect_is_rarely_called_held():
    held = sum(judge(groups_of(b, w), DIFFERENCE).verdict == HELD for b, w in simulate(0.0))
    assert held / SIMULATIONS <= 0.025, held


def test_the_former_bootstrap_fails_the_same_test():
    """Measured: the percentile bootstrap covers 89.9% at 3 runs and 65.3% at 1 run (the new
    interval: 98.9% at 3 runs, conservative since it adds the test-set variance to a spread
    that already holds some)."""
    assert old_coverage(0.0, runs=RUNS) < 0.93
    assert old_coverage(0.0, runs=1) < 0.75


def test_the_power_column_predicts_how_often_an_effect_is_found():
    """At the median minimum detectable effect of the simulated design (about 17 points at 3
    runs), the interval excludes 0 in about 80% of the claims (measured 78.8%: `held`, or
    `unstable` where leaving one run out loses it)."""
    detectable = float(np.median([contrast_interval(groups_of(b, w), DIFFERENCE).detectable for b, w in simulate(0.0)]))
    assert 14 < detectable < 20
    found = [judge(groups_of(b, w), DIFFERENCE).verdict for b, w in simulate(detectable)]
    assert 0.7 <= np.mean([v in (HELD, UNSTABLE) for v in found]) <= 0.9
    assert NOT_HELD not in found


# --- The paired design: every arm scored on the same test images.
# Each simulated claim draws a fresh test set of TEST_IMAGES examples with a latent difficulty
# (N(0, ITEM_SD^2)) and, for each run, an ability (N(mu, RUN_ABILITY_SD^2)); a run gets an
# example right with probability Phi(ability - difficulty). At this item spread an example is
# mostly right or wrong for every run (a test set of easy and hard images); the run-to-run SD
# of accuracy is about 4.7 points, as in our runs.
ITEM_SD, RUN_ABILITY_SD = 1.5, 0.22
SCALE = float(np.sqrt(1 + ITEM_SD**2 + RUN_ABILITY_SD**2))


def paired_claims(effect: float, seed: int, runs: int = RUNS, base: float = 40.0):
    """SIMULATIONS pairs of paired groups {"better", "worse"} whose true accuracies differ by `effect`."""
    rng = np.random.default_rng(seed)
    mu = {
        name: stats.norm.ppf(accuracy / 100) * SCALE for name, accuracy in (("better", base + effect), ("worse", base))
    }
    for _ in range(SIMULATIONS):
        difficulty = rng.normal(0, ITEM_SD, size=TEST_IMAGES)
        groups = {}
        for name, centre in mu.items():
            ability = rng.normal(centre, RUN_ABILITY_SD, size=(runs, 1))
            correct = (rng.random((runs, TEST_IMAGES)) < stats.norm.cdf(ability - difficulty)).astype(float)
            groups[name] = Group.of(100 * correct.mean(axis=1), TEST_IMAGES, correct=correct, test_set="shared")
        yield groups


def unpaired(groups: dict[str, Group]) -> dict[str, Group]:
    return {name: replace(group, correct=None, test_set=None) for name, group in groups.items()}


@pytest.mark.parametrize("effect", [0.0, 8.0])
@pytest.mark.parametrize("design", ["paired", "unpaired"])
def test_the_paired_and_unpaired_intervals_cover_the_true_effect(effect, design):
    covered = 0
    for groups in paired_claims(effect, seed=2):
        low, high = contrast_interval(groups if design == "paired" else unpaired(groups), DIFFERENCE).bounds(CONFIDENCE)
        covered += low <= effect <= high
    assert covered / SIMULATIONS >= 0.93, covered


def test_pairing_brings_the_standard_error_to_the_estimates_spread():
    """The contrast's actual SD over simulated claims against the mean standard error each
    design reports: unpaired overstates it (the test set's shared difficulty cancels in the
    difference), paired stays close above it. Measured: SD 3.98; paired SE 4.27, unpaired 5.45."""
    claims = list(paired_claims(0.0, seed=3))
    estimates = [contrast_interval(g, DIFFERENCE).estimate for g in claims]
    spread = float(np.std(estimates, ddof=1))
    paired_se = float(np.mean([contrast_interval(g, DIFFERENCE).standard_error for g in claims]))
    unpaired_se = float(np.mean([contrast_interval(unpaired(g), DIFFERENCE).standard_error for g in claims]))
    assert spread <= paired_se <= 1.15 * spread, (spread, paired_se)
    assert unpaired_se >= 1.25 * spread, (spread, unpaired_se)
    held = sum(judge(g, DIFFERENCE).verdict == HELD for g in claims)
    assert held / SIMULATIONS <= 0.025, held


# --- Arms that sometimes fail to learn: two arms of equal true accuracy (40%, chance 10%); an
# arm fails with probability FAILURE (all its runs at chance, as when a learning rate diverges).
CHANCE, FAILURE, FAILING_CLAIMS = 10.0, 0.2, 4_000


def failing_arm_claims(seed: int = 4, per_run: bool = False):
    rng = np.random.default_rng(seed)
    for _ in range(FAILING_CLAIMS):
        groups = {}
        for name in ("better", "worse"):
            failed = rng.random(RUNS if per_run else 1) < FAILURE
            truth = np.where(failed, CHANCE, 40.0)
            per_run_truth = np.clip(truth + np.where(failed, 0.0, rng.normal(0, REFERENCE_RUN_SD, RUNS)), 0, 100)
            values = rng.binomial(TEST_IMAGES, per_run_truth / 100) / TEST_IMAGES * 100
            groups[name] = Group.of(values, TEST_IMAGES, CHANCE)
        yield groups


def one_sided_guard(groups: dict[str, Group]) -> bool:
    """The former guard: only the arm said to be better is checked against chance."""
    better = groups["better"]
    return better.mean - CHANCE <= 2 * better.noise()


@pytest.mark.parametrize("per_run", [False, True], ids=["the arm fails", "a run fails"])
def test_failing_arms_bias_neither_way(per_run):
    """Neither false held nor false not held exceeds 5% (measured, arm failures: 0.10% /
    0.15%; run failures: 0.08% / 0%). The former one-sided guard gives 15.9% false held on arm
    failures (0.5% not held), as the review found (16.5%)."""
    verdicts = [judge(g, DIFFERENCE).verdict for g in failing_arm_claims(per_run=per_run)]
    assert np.mean([v == HELD for v in verdicts]) <= 0.05
    assert np.mean([v == NOT_HELD for v in verdicts]) <= 0.05
    if not per_run:
        former = [_raw_verdict(g) for g in failing_arm_claims() if not one_sided_guard(g)]  # what it let through
        assert sum(v == HELD for v in former) / FAILING_CLAIMS > 0.12


def _raw_verdict(groups: dict[str, Group]) -> str:
    """The interval's verdict with no guard at all."""
    low, high = contrast_interval(groups, DIFFERENCE).bounds(CONFIDENCE)
    return HELD if low > 0 else NOT_HELD if high < 0 else "inconclusive"
