"""The verdict logic (dpvip.report.claims.verdicts) on constructed results: a clear difference over
enough runs is held or not held, a difference inside the run-to-run spread is inconclusive,
too few runs never decide, an arm at chance or 100% is uninformative, a verdict that rests on
one run is unstable, parts that disagree are mixed; the interval and the power column match
their formulas."""

from __future__ import annotations

import math

from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from dpvip.report.claims.contrasts import binomial_variance, paired_test_variance
from dpvip.report.claims.verdicts import (
    EQUIVALENT,
    HELD,
    INCONCLUSIVE,
    MIXED,
    NOT_HELD,
    NOT_SHOWN_EQUIVALENT,
    NOT_TESTED,
    REFERENCE_RUN_SD,
    UNINFORMATIVE,
    UNSTABLE,
    Group,
    across,
    contrast_interval,
    judge,
    judge_equivalence,
    not_tested,
)

DIFFERENCE = {"better": 1, "worse": -1}


def verdict_of(better, worse, n=None, effect=None, chance=None):
    groups = {"better": Group.of(better, n, chance), "worse": Group.of(worse, n, chance)}
    return judge(groups, DIFFERENCE, effect)


def test_a_clear_gap_over_three_runs_is_held_and_its_reverse_not_held():
    held = verdict_of([80.1, 79.8, 80.3], [70.2, 70.0, 69.7], n=10_000)
    assert held.verdict == HELD and held.estimate == pytest.approx(10.1, abs=0.01) and held.low > 8
    assert verdict_of([70.2, 70.0, 69.7], [80.1, 79.8, 80.3], n=10_000).verdict == NOT_HELD
    assert held.runs == "3 / 3" and held.interval.startswith("+10.10 [")


def test_the_interval_is_welch_on_the_run_means_plus_the_binomial_variance():
    better, worse, n = [60.0, 64.0, 62.0], [50.0, 51.0, 55.0], 1000
    found = verdict_of(better, worse, n)
    p1, p2 = ((sum(v) / 3 / 100 * n + 2) / (n + 4) for v in (better, worse))
    run1, run2 = 4.0 / 3, 7.0 / 3  # sample variances / 3
    binomial = 1e4 * (p1 * (1 - p1) + p2 * (1 - p2)) / (n + 4)
    se = math.sqrt(run1 + run2 + binomial)
    df = (run1 + run2 + binomial) ** 2 / (run1**2 / 2 + run2**2 / 2)
    half = stats.t.ppf(0.975, df) * se
    assert (found.high - found.low) / 2 == pytest.approx(half, rel=1e-9)
    assert found.detectable == pytest.approx((stats.t.ppf(0.975, df) + stats.t.ppf(0.8, df)) * se)


def test_a_gap_inside_the_run_spread_is_inconclusive():
    found = verdict_of([60.0, 75.0, 68.0], [64.0, 70.0, 58.0], n=10_000)
    assert found.verdict == INCONCLUSIVE and found.low < 0 < found.high


def test_fewer_than_three_runs_never_decide():
    """A 30-point gap on one run each is inconclusive (single run); its interval assumes the
    reference run-to-run SD, so it is wider than the test-set noise alone."""
    one = verdict_of([80.0], [50.0], n=100_000)
    assert one.verdict == INCONCLUSIVE and "single run" in one.reason and str(REFERENCE_RUN_SD) in one.reason
    se = math.sqrt(2) * REFERENCE_RUN_SD  # the test set of 100,000 adds little
    assert stats.t.ppf(0.975, 32) * se < (one.high - one.low) / 2 < stats.t.ppf(0.975, 16) * se * 1.01
    two = verdict_of([80.0, 80.5], [50.0, 50.5], n=100_000)
    assert two.verdict == INCONCLUSIVE and "2 runs" in two.reason


def test_a_final_loss_of_one_run_has_no_interval():
    found = judge({"better": Group.of([1.2]), "worse": Group.of([0.7])}, DIFFERENCE)
    assert found.verdict == INCONCLUSIVE and "single run" in found.reason
    assert found.interval == "+0.50 (no interval from a single run)"
    three = judge({"better": Group.of([1.2, 1.21, 1.19]), "worse": Group.of([0.7, 0.71, 0.69])}, DIFFERENCE)
    assert three.verdict == HELD  # losses over 3 runs: their run-to-run spread, no test set


def test_an_arm_at_chance_or_at_the_ceiling_is_uninformative():
    at_chance = verdict_of([11.0, 10.5, 12.0], [9.0, 10.0, 9.5], n=360, chance=10.0)
    assert at_chance.verdict == UNINFORMATIVE and at_chance.reason.startswith("better (11.2) is within noise of chance")
    at_ceiling = verdict_of([99.9, 100.0, 99.8], [99.8, 99.9, 99.7], n=360, chance=10.0)
    assert at_ceiling.verdict == UNINFORMATIVE and at_ceiling.reason.endswith("; worse (99.8) is within noise of 100%")
    # two-sided: a worse arm at chance (it failed to learn) or a better one at 100% shows nothing either
    worse_failed = verdict_of([80.0, 81.0, 79.5], [10.0, 9.5, 10.5], n=360, chance=10.0)
    assert worse_failed.verdict == UNINFORMATIVE and worse_failed.reason.startswith("worse (10.0) is within noise")
    assert verdict_of([99.9, 100.0, 99.8], [60.0, 61.0, 59.0], n=360, chance=10.0).verdict == UNINFORMATIVE
    assert verdict_of([10.0, 9.5, 10.5], [80.0, 81.0, 79.5], n=360, chance=10.0).verdict == UNINFORMATIVE
    # unless the claim says that arm falls to chance (the claim is the failure)
    groups = {
        "better": Group.of([80.0, 81.0, 79.5], 360, 10.0),
        "worse": Group.of([10.0, 9.5, 10.5], 360, 10.0, may_sit_at_chance=True, label="LeCun init"),
    }
    assert judge(groups, DIFFERENCE).verdict == HELD
    # reasons name a group by its label
    groups["better"] = Group.of([10.5, 9.5, 10.0], 360, 10.0, label="zero init")
    assert judge(groups, DIFFERENCE).reason.startswith("zero init (10.0) is within noise of chance")


def test_a_verdict_that_rests_on_one_run_is_unstable():
    """Held over all runs, but only because of the third run of `better`: without it the
    interval (the same spread, two runs) contains 0."""
    found = verdict_of([70.0, 70.5, 73.0], [66.0, 66.5, 65.5], n=100_000)
    assert found.verdict == UNSTABLE and found.reason == "held on all runs, but without better run 3: inconclusive"
    assert verdict_of([70.0, 70.5, 71.0], [66.0, 66.5, 65.5], n=100_000).verdict == HELD


def test_several_contrasts_must_all_hold():
    """StyleGAN-Oriented beats each other set: held only if it beats both; not held when one
    other set beats it beyond a Bonferroni-corrected interval."""
    groups = {
        "oriented": Group.of([70, 71, 69], 100_000),
        "leaves": Group.of([60, 61, 59], 100_000),
        "shaders": Group.of([69.5, 70.5, 68.5], 100_000),
    }
    contrasts = [{"oriented": 1, other: -1} for other in ("leaves", "shaders")]
    found = judge(groups, contrasts)
    assert found.verdict == INCONCLUSIVE and found.estimate == pytest.approx(0.5)  # the binding contrast
    groups["shaders"] = Group.of([80, 81, 79], 100_000)
    assert judge(groups, contrasts).verdict == NOT_HELD
    groups["shaders"] = Group.of([60, 61, 59], 100_000)
    assert judge(groups, contrasts).verdict == HELD


def test_the_interval_shown_is_the_one_that_decides():
    """Two contrasts: a small precise one (held alone) and a large noisy one (inconclusive):
    the claim is inconclusive and shows the noisy contrast, whose interval contains 0."""
    groups = {
        "a": Group.of([62, 62.1, 61.9], 100_000),
        "b": Group.of([60, 60.1, 59.9], 100_000),
        "c": Group.of([40, 70, 55], 100_000),
    }
    found = judge(groups, [{"a": 1, "b": -1}, {"a": 1, "c": -1}])
    assert found.verdict == INCONCLUSIVE and found.low < 0 < found.high and found.estimate == pytest.approx(7.0)


def test_a_contrast_of_four_groups():
    """The gap grows: (warm - cold) at small epsilon minus (warm - cold) at large epsilon."""
    groups = {
        "warm_small": Group.of([70, 71, 69], 10_000),
        "cold_small": Group.of([55, 56, 54], 10_000),
        "warm_large": Group.of([85, 86, 84], 10_000),
        "cold_large": Group.of([82, 83, 81], 10_000),
    }
    contrast = {"warm_small": 1, "cold_small": -1, "warm_large": -1, "cold_large": 1}
    found = judge(groups, contrast)
    assert found.verdict == HELD and found.estimate == pytest.approx(12.0)
    assert contrast_interval(groups, contrast).standard_error > 0


def test_the_power_column():
    """Runs needed: the fewest runs per group whose minimum detectable effect reaches the
    paper's effect at this spread; none when the test set alone is too noisy."""
    groups = {"better": Group.of([62, 56, 60], 10_000), "worse": Group.of([52, 48, 50], 10_000)}
    needed = int(judge(groups, DIFFERENCE, paper_effect=5.0).runs_needed)
    assert contrast_interval(groups, DIFFERENCE, needed).detectable <= 5.0
    assert contrast_interval(groups, DIFFERENCE, needed - 1).detectable > 5.0 and needed > 3
    assert judge(groups, DIFFERENCE).runs_needed == "no paper effect"
    # on 360 test images each mean carries 2.6 points of test-set noise whatever the runs
    small = {name: Group.of(group.values, 360) for name, group in groups.items()}
    assert judge(small, DIFFERENCE, paper_effect=5.0).runs_needed == "none: 360 test images are too few"


def test_missing_results_and_untestable_claims():
    missing = judge({"better": Group.of([50.0]), "worse": Group.of([float("nan")])}, DIFFERENCE)
    assert missing.verdict == NOT_TESTED and "worse" in missing.reason
    assert not_tested("no data").verdict == NOT_TESTED and not_tested("no data").interval == ""


def test_parts_across_settings():
    held = verdict_of([90, 91, 89], [10, 11, 9], 10_000)
    not_held = verdict_of([10, 11, 9], [90, 91, 89], 10_000)
    leaning_for = verdict_of([60, 75, 68], [58, 66, 59], 10_000)
    assert leaning_for.verdict == INCONCLUSIVE and leaning_for.estimate > 0
    assert across({"ResNet": held, "ViT": held}).verdict == HELD
    # one part decisive, the other leaning the other way inconclusively: the decisive part speaks
    one_way = across({"ResNet": not_held, "ViT": leaning_for})
    assert one_way.verdict == NOT_HELD and one_way.reason.startswith("ResNet: not held")
    mixed = across({"ResNet": held, "ViT": not_held})
    assert mixed.verdict == MIXED and mixed.reason == "the parts disagree: held for ResNet, not held for ViT"
    assert across({"ResNet": held, "ViT": leaning_for}).verdict == INCONCLUSIVE
    assert across({"ResNet": held, "ViT": not_tested("x")}).verdict == NOT_TESTED
    assert across({"ResNet": held, "ViT": held}).interval.startswith("ResNet: +80.00 [")


def test_decisive_and_inconclusive_verdicts_say_why():
    assert verdict_of([80.1, 79.8, 80.3], [70.2, 70.0, 69.7], n=10_000).reason == "the 95% interval lies above 0"
    assert verdict_of([70.2, 70.0, 69.7], [80.1, 79.8, 80.3], n=10_000).reason == "the 95% interval lies below 0"
    found = verdict_of([60.0, 75.0, 68.0], [64.0, 70.0, 58.0], n=10_000)
    assert (
        found.reason
        == f"the 95% interval contains 0; an effect of {found.detectable:.1f} would be found with 80% power"
    )


def paired_groups(better_runs, worse_runs, test_set="digits-test"):
    """Groups whose runs carry per-example correctness on one test set."""

    def group(runs):
        return Group.of([100 * np.mean(r) for r in runs], len(runs[0]), correct=runs, test_set=test_set)

    return {"better": group(better_runs), "worse": group(worse_runs)}


def test_arms_on_one_test_set_are_compared_paired():
    """Both arms get the same 300 hard examples wrong and the same 600 easy ones right; `better`
    also gets 60 of the 100 middle ones, `worse` 40. The per-example contrast is 20 on the
    middle hundred, 0 elsewhere: its test-set variance var(d)/n, far below the sum of the two
    binomial variances."""
    n = 1_000
    base = np.zeros(n)
    base[300:900] = 1  # 600 easy examples right; 300 hard ones (0-299) and the middle 100 (900-999) wrong
    better, worse = base.copy(), base.copy()
    better[900:960], worse[900:940] = 1, 1
    groups = paired_groups([better] * 3, [worse] * 3)
    d = 100 * (better - worse)
    assert paired_test_variance(groups, DIFFERENCE) == pytest.approx(np.var(d, ddof=1) / n)
    paired = contrast_interval(groups, DIFFERENCE)
    unpaired = contrast_interval({k: replace(g, correct=None, test_set=None) for k, g in groups.items()}, DIFFERENCE)
    assert paired.estimate == unpaired.estimate == pytest.approx(2.0)
    assert paired.standard_error == pytest.approx(math.sqrt(np.var(d, ddof=1) / n))
    assert unpaired.standard_error > 3 * paired.standard_error
    # on different test sets, or with one run that kept no correctness, the arms are unpaired
    apart = {**groups, "worse": replace(groups["worse"], test_set="other")}
    assert paired_test_variance(apart, DIFFERENCE) is None
    partly = Group.of([66.0, 64.0], n, correct=[better, None], test_set="digits-test")
    assert partly.correct is None and partly.test_set is None
    # a run left out takes its correctness with it
    assert len(groups["better"].without(0).correct) == 2


def test_identical_paired_predictions_keep_a_floor():
    same = np.r_[np.ones(50), np.zeros(50)]
    groups = paired_groups([same] * 3, [same] * 3)
    assert paired_test_variance(groups, DIFFERENCE) == pytest.approx(2 * binomial_variance(0.0, 100))


def test_equivalence_within_a_margin():
    """TOST: equivalent when the 90% interval lies inside the margin; not held when the 95%
    interval lies wholly outside; otherwise not shown equivalent. Arms at chance are alike
    for want of learning: uninformative."""
    close = {"better": Group.of([70.1, 69.9, 70.0], 100_000), "worse": Group.of([70.2, 70.0, 69.8], 100_000)}
    found = judge_equivalence(close, DIFFERENCE, margin=2.0)
    assert found.verdict == EQUIVALENT and -2 < found.low < found.high < 2 and "margin +-2" in found.reason
    far = {"better": Group.of([80.1, 79.9, 80.0], 100_000), "worse": Group.of([70.2, 70.0, 69.8], 100_000)}
    assert judge_equivalence(far, DIFFERENCE, margin=2.0).verdict == NOT_HELD
    noisy = {"better": Group.of([60.0, 75.0, 68.0], 100_000), "worse": Group.of([64.0, 70.0, 58.0], 100_000)}
    assert judge_equivalence(noisy, DIFFERENCE, margin=2.0).runs_needed == "> 50"
    shown = judge_equivalence(noisy, DIFFERENCE, margin=10.0)
    assert shown.verdict == NOT_SHOWN_EQUIVALENT and int(shown.runs_needed) > 3
    at_chance = {name: Group.of([10.0, 10.5, 9.5], 360, 10.0) for name in ("better", "worse")}
    assert judge_equivalence(at_chance, DIFFERENCE, margin=2.0).verdict == UNINFORMATIVE
    one_run = {name: Group.of([70.0], 100_000) for name in ("better", "worse")}
    assert judge_equivalence(one_run, DIFFERENCE, margin=2.0).verdict == INCONCLUSIVE
    with pytest.raises(ValueError, match="margin must be positive"):
        judge_equivalence(close, DIFFERENCE, margin=0)


def test_the_verdicts_repeat():
    assert verdict_of([60, 62, 61], [58, 61, 57], 360) == verdict_of([60, 62, 61], [58, 61, 57], 360)
