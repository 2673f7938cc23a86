"""Calibration of the verdicts (dpvip.report.verdicts) on simulated claims at the noise of our
own runs: each run's true accuracy spreads by the between-seed SD measured over our eight
3-seed DP-RandP groups (4.66 points), and is then measured on 360 test images (binomial).

At 3 runs per group the 95% interval must cover the true effect at least 93% of the time
over 1,000 simulated claims, and a null effect must be called held at most 2.5% of the time.
The procedure the verdicts used before (a two-level percentile bootstrap: runs resampled,
then each accuracy redrawn as a binomial proportion) fails the same test: it is kept here,
and only here, as the reference that shows it."""

from __future__ import annotations

import numpy as np
import pytest

from dpvip.report.verdicts import (
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
