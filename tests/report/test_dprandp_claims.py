"""DP-RandP's claims on fake results (dpvip.report.dprandp_claims): they hold on the paper's
pattern over 3 seeds and fail when the numbers flip; too few seeds, too few test images, arms
at chance and the live weights are told apart."""

from __future__ import annotations

import copy
import math

from test_dprandp_tables import CONFIG, fake_results, plan_with_inf

from dpvip.plan.dprandp_runs import DPRandPPlan, PrivateRun
from dpvip.report.dprandp_claims import LIVE_COLUMN, claims_table

THREE_SEEDS_SECTION = copy.deepcopy(CONFIG["dprandp"])
THREE_SEEDS_SECTION["private"]["seeds"] = THREE_SEEDS_SECTION["ablations"]["seeds"] = [0, 1, 2]
THREE_SEEDS = DPRandPPlan(THREE_SEEDS_SECTION, CONFIG["synthetic"]["datasets"])
ONE_ABLATION_SEED = DPRandPPlan(
    {**THREE_SEEDS_SECTION, "ablations": {**THREE_SEEDS_SECTION["ablations"], "seeds": [0]}},
    CONFIG["synthetic"]["datasets"],
)


def claims(accuracy, plan: DPRandPPlan = THREE_SEEDS, test_examples: int = 100_000):
    """Verdicts by claim key, on constructed results measured on `test_examples` images each."""
    results = fake_results("claims", accuracy, plan)
    for result in results.values():
        result["data"]["test"] = test_examples
    frame, _, _ = claims_table(plan, results)
    return frame.set_index(frame["claim"].str[1])["verdict"].to_dict(), frame


def paper_like(run: PrivateRun) -> float:
    """The paper's pattern: warm ahead of cold, more so at small epsilon; Phase II helps; the
    probe is flat in epsilon; StyleGAN the best synthetic set (seeds 0.2 points apart)."""
    if run.init.endswith("dead_leaves") or run.init.endswith("shaders"):
        return 50.0
    if run.warm and run.phase2_steps == 24:  # Phase II only: flat in epsilon
        return 60 + 0.1 * run.epsilon
    cold_gap = 12 - run.epsilon  # the gap shrinks as epsilon grows
    return 65 + run.epsilon + (2 if run.phase2_steps else 0) - (0 if run.warm else cold_gap) + 0.2 * run.seed


def test_claims_hold_on_the_papers_pattern():
    verdicts, frame = claims(paper_like)
    assert verdicts == dict.fromkeys("abcdefgh", "held")
    assert (
        "epsilon 1: DP-RandP w/o Phase II 66.20 ± 0.20 (3 runs) vs Phase III only (De et al. [15]) "
        "55.20 ± 0.20 (3 runs)" in (frame.at[0, "measured"])
    )
    assert frame.at[0, "ours: statistic [95% CI]"].startswith("+11.00 [") and frame.at[0, "runs per group"] == "3 / 3"
    assert "69.03" in frame.at[0, "paper's evidence"] and frame.at[0, "paper's effect"] == "12.23"
    # the live weights are 0.5 below the EMA in every run: the same verdicts beside them
    assert all(cell.startswith("held +") for cell in frame[LIVE_COLUMN])


def test_claims_fail_when_the_numbers_flip():
    def flipped(run: PrivateRun) -> float:
        if run.init.endswith("dead_leaves"):
            return 70.0  # another synthetic set beats StyleGAN
        if run.warm and run.phase2_steps == 24:  # Phase II only keeps up and ends ahead
            return 30 + 3 * run.epsilon
        cold_gap = run.epsilon - 12  # cold ahead, more so at small epsilon
        return 65 + run.epsilon - (1 if run.phase2_steps else 0) - (0 if run.warm else cold_gap)

    verdicts, _ = claims(flipped)
    assert verdicts == dict.fromkeys("abcdefgh", "not held")


def test_the_same_gap_on_few_test_images_is_inconclusive():
    """Claim (c)'s 2 points on 360 test images and 3 seeds: inside the test-set noise."""
    verdicts, frame = claims(paper_like, test_examples=360)
    assert verdicts["c"] == "inconclusive" and verdicts["a"] == "held"
    low, high = frame.at[2, "ours: statistic [95% CI]"].split("[")[1].rstrip("]").split(", ")
    assert float(low) < 0 < float(high)


def test_claims_cannot_tell_without_results():
    frame, _, _ = claims_table(THREE_SEEDS, {})
    assert (frame["verdict"] == "not tested").all() and list(frame["claim"].str[:3]) == [f"({k})" for k in "abcdefgh"]


def test_claim_b_takes_epsilon_inf_as_the_largest():
    plan = plan_with_inf(THREE_SEEDS_SECTION)

    def gap_closes_only_at_inf(run: PrivateRun) -> float:
        if run.warm:
            return 70.0
        return 70.0 if math.isinf(run.epsilon) else 60.0 - run.epsilon  # gap 11 at 1, 18 at 8, 0 at inf

    verdicts, frame = claims(gap_closes_only_at_inf, plan)
    assert verdicts["b"] == "held" and "epsilon inf: +0.00" in frame.at[1, "measured"]
    results = fake_results("claims", gap_closes_only_at_inf, plan)
    finite = {path: result for path, result in results.items() if result["run"]["epsilon"] is not None}
    for result in finite.values():
        result["data"]["test"] = 100_000
    frame, _, _ = claims_table(plan, finite)  # without the inf runs the largest is 8: the gap grew
    assert frame.at[1, "verdict"] == "not held"


def test_ablations_on_one_seed_are_inconclusive_whatever_their_gap():
    verdicts, frame = claims(paper_like, ONE_ABLATION_SEED)
    assert verdicts["g"] == verdicts["h"] == "inconclusive" and verdicts["a"] == "held"
    assert frame.loc[frame["claim"].str.startswith("(g)"), "why"].item().startswith("inconclusive (single run)")


def test_a_claim_on_arms_at_chance_is_uninformative():
    def at_chance(run: PrivateRun) -> float:
        return 11.0 + (1.0 if run.warm else 0.0) + 0.2 * run.seed  # 10 classes: chance is 10%

    verdicts, frame = claims(at_chance, test_examples=360)
    assert verdicts["a"] == "uninformative"
    assert "within noise of chance (10%)" in frame.loc[frame["claim"].str.startswith("(a)"), "why"].item()


def test_a_verdict_resting_on_the_ema_shows_beside_the_live_one():
    results = fake_results("claims", paper_like, THREE_SEEDS)
    for result in results.values():
        result["data"]["test"] = 100_000
        if not result["run"]["init"].startswith("cold"):
            result["accuracy_live"]["test"] = 20.0 + 0.2 * result["run"]["seed"]  # the live weights lag far behind
    frame, _, notes = claims_table(THREE_SEEDS, results)
    row = frame.set_index(frame["claim"].str[1]).loc["a"]
    assert row["verdict"] == "held" and row[LIVE_COLUMN].startswith("not held")
    assert any("live weights" in note for note in notes)
