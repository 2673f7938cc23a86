"""The verdict logic (dpvip.report.verdicts) on constructed results: a clear difference is
held or not held, a difference inside the noise is inconclusive, a missing group is not
tested; the interval carries seed spread and test-set noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpvip.report.verdicts import HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTED, Group, both, judge, not_tested


def difference(means):
    return means["better"] - means["worse"]


def verdict_of(better, worse, n=None):
    return judge({"better": Group.of(better, n), "worse": Group.of(worse, n)}, difference)


def test_a_clear_gap_over_seeds_is_held_and_its_reverse_not_held():
    held = verdict_of([80.1, 79.8, 80.3], [70.2, 70.0, 69.7], n=10_000)
    assert held.verdict == HELD and held.estimate == pytest.approx(10.1, abs=0.01) and held.low > 9
    assert verdict_of([70.2, 70.0, 69.7], [80.1, 79.8, 80.3], n=10_000).verdict == NOT_HELD
    assert held.seeds == "3 / 3" and held.interval.startswith("+10.10 [")


def test_a_gap_inside_the_seed_spread_is_inconclusive():
    found = verdict_of([60.0, 75.0, 68.0], [64.0, 70.0, 58.0])
    assert found.verdict == INCONCLUSIVE and found.low < 0 < found.high


def test_one_seed_carries_the_test_set_noise():
    """95.3 against 94.4 on 360 test images: within the binomial noise (se about 1.7 points);
    the same on 100,000 images is a real difference."""
    assert verdict_of([95.28], [94.44], n=360).verdict == INCONCLUSIVE
    assert verdict_of([95.28], [94.44], n=100_000).verdict == HELD
    interval = verdict_of([95.28], [94.44], n=360)
    assert 2.5 < interval.high - interval.estimate < 4.5  # about 1.96 x 1.7


def test_the_interval_matches_the_normal_approximation():
    """Two binomial proportions of n: the bootstrap's 95% half-width is 1.96 sqrt(2 p (1-p) / n)."""
    found = verdict_of([50.0], [50.0], n=2000)
    expected = 1.96 * math.sqrt(2 * 0.25 / 2000) * 100
    assert (found.high - found.low) / 2 == pytest.approx(expected, rel=0.05)


def test_a_statistic_of_four_groups():
    """The gap grows: (warm - cold) at small epsilon minus (warm - cold) at large epsilon."""
    groups = {
        "warm_small": Group.of([70, 71, 69], 10_000),
        "cold_small": Group.of([55, 56, 54], 10_000),
        "warm_large": Group.of([85, 86, 84], 10_000),
        "cold_large": Group.of([82, 83, 81], 10_000),
    }
    found = judge(groups, lambda m: (m["warm_small"] - m["cold_small"]) - (m["warm_large"] - m["cold_large"]))
    assert found.verdict == HELD and found.estimate == pytest.approx(12.0)


def test_missing_results_and_untestable_claims():
    missing = judge({"better": Group.of([50.0]), "worse": Group.of([float("nan")])}, difference)
    assert missing.verdict == NOT_TESTED and "worse" in missing.reason
    assert not_tested("no data").verdict == NOT_TESTED and not_tested("no data").interval == ""


def test_losses_resample_what_they_are_given():
    lower, higher = Group.of(np.linspace(0.60, 0.62, 4)), Group.of(np.linspace(1.05, 1.07, 4))
    found = judge({"better": higher, "worse": lower}, difference)
    assert found.verdict == HELD and found.estimate == pytest.approx(0.45)


def test_both_parts():
    held, inconclusive = verdict_of([90], [10], 10_000), verdict_of([50], [50], 100)
    not_held = verdict_of([10], [90], 10_000)
    assert both(held, held).verdict == HELD
    assert both(held, inconclusive).verdict == INCONCLUSIVE
    assert both(inconclusive, not_held).verdict == NOT_HELD
    assert both(held, not_tested("x")).verdict == NOT_TESTED


def test_the_verdicts_repeat():
    assert verdict_of([60, 62], [58, 61], 360) == verdict_of([60, 62], [58, 61], 360)
