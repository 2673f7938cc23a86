"""DP-RandP's claims on fake results (dpvip.report.dprandp.claims): they hold on the paper's
pattern over 3 seeds and fail when the numbers flip; too few seeds, too few test images, arms
at chance and the live weights are told apart."""

from __future__ import annotations

import copy
import dataclasses
import math

import pandas as pd

from dprandp.test_tables import CONFIG, fake_results, plan_with_inf

from dpvip.plan.dprandp_runs import DPRandPPlan, PrivateRun
from dpvip.report.dprandp.claims import CATALOGUE, LIVE_COLUMN, NOT_HERE, claims_table, dprandp_claims

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
    return dict(zip(keys(frame), frame["verdict"])), frame


def keys(frame) -> list[str]:
    return list(frame["claim"].str.extract(r"^\((\w+)\)")[0])


# Judged on these fake runs (the others need the probe studies, epsilon 2 or inf, or runs the
# stand-in does not have: not tested)
JUDGED = [*"abcdefghijklmop"]


def paper_like(run: PrivateRun) -> float:
    """The paper's pattern: warm ahead of cold, more so at small epsilon; Phase II helps, more
    at small epsilon, but not from a cold start; the probe is flat in epsilon; StyleGAN the
    best synthetic set; the larger model a little better (seeds 0.2 points apart)."""
    if run.init.endswith("dead_leaves") or run.init.endswith("shaders"):
        return 50.0
    bigger = 1.0 if run.model == "wrn16_1" else 0.0
    if run.warm and run.phase2_steps == 24:  # Phase II only: flat in epsilon
        return 60 + 0.1 * run.epsilon + bigger
    if not run.warm:  # the gap shrinks as epsilon grows; Phase II hurts without a prior
        return 65 + run.epsilon - (12 - run.epsilon) - 0.2 * run.phase2_steps + 0.2 * run.seed
    phase2 = 2 + 0.5 * (8 - run.epsilon) if run.phase2_steps else 0  # Phase II's gain shrinks with epsilon
    return 65 + run.epsilon + phase2 + bigger + 0.2 * run.seed


def test_claims_hold_on_the_papers_pattern():
    verdicts, frame = claims(paper_like)
    assert {k: verdicts[k] for k in JUDGED} == dict.fromkeys(JUDGED, "held")
    assert {v for k, v in verdicts.items() if k not in JUDGED} == {"not tested"}
    assert (
        "epsilon 1: DP-RandP w/o Phase II 66.20 ± 0.20 (3 runs) vs Phase III only (De et al. [15]) "
        "55.20 ± 0.20 (3 runs)" in (frame.at[0, "measured"])
    )
    assert frame.at[0, "ours: statistic [95% CI]"].startswith("+11.00 [") and frame.at[0, "runs per group"] == "3 / 3"
    assert "69.03" in frame.at[0, "paper's evidence"] and frame.at[0, "paper's effect"] == "12.23"
    # the live weights are 0.5 below the EMA in every run: the same verdicts beside them
    live = dict(zip(keys(frame), frame[LIVE_COLUMN]))
    assert all(live[k].startswith("held ") for k in JUDGED)


def test_claims_fail_when_the_numbers_flip():
    def flipped(run: PrivateRun) -> float:
        if run.init.endswith("dead_leaves"):
            return 70.0  # another synthetic set beats StyleGAN
        smaller = -1.0 if run.model == "wrn16_1" else 0.0  # the larger model behind
        if run.warm and run.phase2_steps == 24:  # Phase II only keeps up and ends ahead
            return 30 + 3 * run.epsilon + smaller
        if not run.warm:  # cold ahead, more so at small epsilon; Phase II helps it
            return 65 + run.epsilon - (run.epsilon - 12) + 0.5 * run.phase2_steps
        phase2 = -1 - 0.5 * (8 - run.epsilon) if run.phase2_steps else 0  # Phase II hurts, more at small epsilon
        return 65 + run.epsilon + phase2 + smaller

    verdicts, _ = claims(flipped)
    assert {k: verdicts[k] for k in JUDGED} == dict.fromkeys(JUDGED, "not held")


def test_the_same_gap_on_few_test_images_is_inconclusive():
    """Claim (c)'s 2 points on 360 test images and 3 seeds: inside the test-set noise."""
    verdicts, frame = claims(paper_like, test_examples=360)
    assert verdicts["c"] == "inconclusive" and verdicts["a"] == "held"
    low, high = frame.at[2, "ours: statistic [95% CI]"].split("[")[1].rstrip("]").split(", ")
    assert float(low) < 0 < float(high)


def test_claims_cannot_tell_without_results():
    frame, _, _ = claims_table(THREE_SEEDS, {})
    assert (frame["verdict"] == "not tested").all() and keys(frame) == CATALOGUE.keys()
    assert keys(frame)[:3] == ["a", "b", "c"] and keys(frame)[-2:] == ["am", "an"]  # by length, then alphabet


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
    row = frame.set_index(pd.Index(keys(frame))).loc["a"]
    assert row["verdict"] == "held" and row[LIVE_COLUMN].startswith("not held")
    assert any("live weights" in note for note in notes)


def probe_study(accuracy, epsilons=(0.03, 1, 8), seeds=(0, 1, 2)) -> dict:
    """A private linear probing study (one learning rate per epsilon), `accuracy(epsilon)` per seed."""
    runs = [
        {
            "row": "Ours",
            "column": f"epsilon={epsilon:g}",
            "settings": {"lr": 1.0, "seed": seed},
            "result": {"accuracy": accuracy(epsilon) + 0.2 * seed},
        }
        for epsilon in epsilons
        for seed in seeds
    ]
    return {"runs": runs, "features": {"x": {"test": 100_000, "classes": 10}}}


def probe_verdicts(cifar, imagenet) -> dict:
    results = fake_results("claims", paper_like, THREE_SEEDS)
    for result in results.values():
        result["data"]["test"] = 100_000
    studies = {"dprandp_probe_cifar": probe_study(cifar), "dprandp_probe_imagenet": probe_study(imagenet, (1, 8))}
    return {claim.key: claim for claim in dprandp_claims(THREE_SEEDS, results, studies=studies)}


def test_the_probe_studies_claims_hold_on_the_papers_pattern_and_fail_flipped():
    """(z) the CIFAR-10 probe grows with epsilon; (aa) the ImageNet probe too; (ag) the probe of
    the embedding layer beats Phase II only (60.1 at epsilon 1 in `paper_like`)."""
    held = probe_verdicts(lambda e: 65 + 3 * e, lambda e: 20 + 2 * e)
    assert {k: held[k].verdict.verdict for k in ("z", "aa", "ag")} == dict.fromkeys(("z", "aa", "ag"), "held")
    assert held["z"].measured.startswith("dprandp_probe_cifar: epsilon 8 ") and " vs 0.03 " in held["z"].measured
    assert held["ag"].verdict.runs == "3 / 3"
    flipped = probe_verdicts(lambda e: 50 - 3 * e, lambda e: 40 - 2 * e)
    assert {k: flipped[k].verdict.verdict for k in ("z", "aa", "ag")} == dict.fromkeys(("z", "aa", "ag"), "not held")


def test_the_new_main_task_claims_compare_the_right_groups():
    verdicts, frame = claims(paper_like)
    measured = dict(zip(keys(frame), frame["measured"]))
    assert measured["j"].startswith("DP-RandP - DP-RandP w/o Phase II: epsilon 1: +5.50; epsilon 8: +2.00")
    assert measured["p"].startswith("cold, epsilon 1, Phase II steps: 0: ") and "; 24: " in measured["p"]
    assert measured["o"].startswith("DP-RandP, epsilon 1: WRN-40-4 ")  # the ablation model is the larger
    assert "MoCo [30] / DP-RandP" in measured["m"] and "epsilon 1" in measured["m"]
    assert measured["i"].startswith("epsilon 8: DP-RandP ")
    why = dict(zip(keys(frame), frame["why"]))
    assert "runs_of" in why["q"] and "dprandp.ablations.epsilons" in why["n"] and why["u"] == NOT_HERE["u"]
    assert "epsilon .inf" in why["aj"] and "epsilon 2" in why["y"]


def test_epsilon_inf_in_the_schedule_tests_claim_aj():
    """Without noise DP-RandP still beats the cold start (epsilon inf read as 10 in the pattern)."""

    def capped(run: PrivateRun) -> float:
        return paper_like(dataclasses.replace(run, epsilon=min(run.epsilon, 10.0)))

    verdicts, frame = claims(capped, plan_with_inf(THREE_SEEDS_SECTION))
    assert verdicts["aj"] == "held" and dict(zip(keys(frame), frame["measured"]))["aj"].startswith("epsilon inf:")
