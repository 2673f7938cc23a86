"""ViP's claims on constructed results: each claim compares the runs it names (the main
ViP against (Syn)-ViP, the ablations' extremes, the sizes of Figure 5), its statistic points
the paper's way on the paper's pattern and the other way when the numbers flip, and with one
pre-training run per model it is never decisive (single run); claims whose runs a
configuration lacks are not tested."""

from __future__ import annotations

import re

import pytest

from dpvip.plan.vip_evaluations import Evaluation, EvaluationPlan
from dpvip.plan.vip_rows import Backbones
from dpvip.plan.vip_runs import expand_runs, synthetic_variants
from dpvip.report.vip.claims import CATALOGUE, vip_claims, vip_claims_table

SETTINGS = {"image_size": 32, "patch_size": 4, "steps": 24, "batch_size": 256, "warmup_steps": 4}
ABLATIONS = {
    "dataset_size": [1024],
    "random_init": ["micro", "pico"],
    "model_size": ["pico"],
    "batch_size": [64],
    "epsilon": [{"epsilon": 2.0, "steps": 6}],
    "synthetic_epochs": [2],
    "decoder_depth": [1],
    "mask_ratio": [0.5],
}
SECTION = {
    "image_size": 32,
    "datasets": {"ImageNet-1K": {"source": "digits"}, "CIFAR-100": {"source": "digits"}},
    "linear_probe": {"datasets": ["ImageNet-1K"]},
    "few_shot": {"datasets": {"CIFAR-100": [10, 30]}},
    "dp_finetune": {"dataset": "ImageNet-1K"},
}
TEST = 100_000  # test images per result: constructed gaps are far outside the noise


def plan(ablations=ABLATIONS, repeats: int = 1) -> EvaluationPlan:
    section = {"dataset": "laion", "models": ["micro"], "settings": SETTINGS, "ablations": ablations}
    runs = expand_runs(section | {"repeats": repeats}, ["micro", "pico", *synthetic_variants(section)], 4096)
    return EvaluationPlan(SECTION, Backbones(["micro", "pico"], runs, "micro"))


def results(accuracy, repeats: int = 1) -> dict[str, dict]:
    """A result per evaluation the claims read, its accuracy `accuracy(backbone)`."""
    found = {}
    for backbone in ["syn_vip_micro", "syn_vip_pico", *plan(repeats=repeats).backbones.runs]:
        for evaluation, column in (
            (Evaluation("linear_probe", backbone, "ImageNet-1K"), "ImageNet-1K"),
            (Evaluation("few_shot", backbone, "CIFAR-100", 10), "CIFAR-100 10-shot"),
            (Evaluation("dp_finetune", backbone, "ImageNet-1K"), "Top-1 Accuracy"),
        ):
            found[evaluation.path] = {"columns": {column: accuracy(backbone)}, "data": {"test": TEST}}
    for backbone in ("syn_vip_micro", "vip_micro"):  # COCO's AP is a fraction, ADE20K's mIoU in points
        found[Evaluation("coco", backbone).path] = {"columns": {"COCO AP box": accuracy(backbone)}}  # points, as stored
        found[Evaluation("ade20k", backbone).path] = {"columns": {"ADE20K mIoU": accuracy(backbone)}}
    return found


def paper_like(backbone: str) -> float:
    """ViP above (Syn)-ViP; synthetic init above random, and gaining more with size; more
    data, a larger batch and a larger epsilon better."""
    repeat = re.fullmatch(r"(.+)_r(\d+)", backbone)
    if repeat:
        return paper_like(repeat[1]) + 0.2 * int(repeat[2])
    return {
        "syn_vip_micro": 50.0,  # repeats (<run>_r<k>) score 0.2 k points above their first run
        "syn_vip_pico": 49.0,  # (Syn)-ViP gains less from size than ViP
        "vip_micro_dec1": 45.0,
        "vip_micro_mask50": 54.0,
        "vip_micro": 56.0,
        "vip_pico": 52.0,
        "vip_micro_random": 45.0,
        "vip_pico_random": 44.0,
        "vip_micro_n1024": 53.0,
        "vip_micro_b64": 51.0,
        "vip_micro_eps2": 51.5,
        "vip_micro_syn_e2": 54.0,
    }[backbone]


LOSSES = {  # the main run lowest; random init highest; the larger model lower, but not from random
    "vip_micro": [0.70, 0.62, 0.60, 0.59],
    "vip_pico": [0.75, 0.70, 0.68, 0.67],
    "vip_micro_random": [1.3, 1.25, 1.2, 1.19],
    "vip_pico_random": [1.3, 1.2, 1.19, 1.18],
    "vip_micro_n1024": [0.8, 0.7, 0.66, 0.65],  # less data: more noise, a higher loss
    "vip_micro_b64": [0.9, 0.8, 0.75, 0.74],  # a smaller batch: a higher loss
    "vip_micro_syn_e2": [0.8, 0.72, 0.70, 0.69],  # a short (Syn)-ViP: between the main run and random
}


def verdicts(accuracy, losses=LOSSES, evaluation_plan=None):
    found = vip_claims(evaluation_plan or plan(), results(accuracy), losses)
    return {claim.key: claim.verdict.verdict for claim in found}, {claim.key: claim for claim in found}


TESTED = [*"abcdefghijkopqry", "ad", "ae", "af", "ag", "ah", "ai"]
NOT_TESTED = [*"lmnstuvwxz", "aa", "ab", "ac", "aj", "ak", "al"]  # ak: no deeper decoder in these runs


def test_every_claim_points_the_papers_way_but_one_run_decides_nothing():
    found, claims = verdicts(paper_like)
    assert found == dict.fromkeys(TESTED, "inconclusive") | dict.fromkeys(NOT_TESTED, "not tested")
    assert all(claims[k].verdict.estimate > 0 for k in TESTED if k != "y")
    assert claims["y"].verdict.interval.startswith("COCO AP box: +6.00")  # one part per task, in points
    assert all(claims[k].verdict.reason.startswith("inconclusive (single run)") for k in TESTED if k != "y")
    assert claims["c"].verdict.interval.endswith("(no interval from a single run)")  # a loss: no spread
    assert claims["a"].verdict.runs_needed.isdigit()  # 5.9 points on 100,000 test images: reachable
    assert claims["o"].measured == "final DP loss: vip_micro 0.59 vs vip_micro_syn_e2 0.69"
    assert claims["a"].measured == "probe: vip_micro 56.00 vs syn_vip_micro 50.00"
    assert claims["b"].measured.startswith("CIFAR-100 10-shot:")  # the fewest shots
    assert claims["h"].measured == "probe: vip_micro 56.00 vs vip_micro_n1024 53.00"  # all data vs 1,024
    assert claims["i"].measured == "probe: vip_micro 56.00 vs vip_micro_b64 51.00"  # B 256 vs 64
    assert claims["j"].measured == "probe: vip_micro 56.00 vs vip_micro_eps2 51.50"  # epsilon 8 vs 2
    assert claims["g"].verdict.estimate == pytest.approx((56 - 52) - (45 - 44))
    assert claims["c"].measured.startswith("final DP loss: vip_micro 0.59 vs vip_micro_random 1.19")
    assert claims["p"].measured == "final DP loss: vip_micro 0.59 vs vip_micro_n1024 0.65"
    assert claims["ad"].verdict.estimate == pytest.approx((56 - 52) - (50 - 49))
    assert claims["ag"].measured == "probe: vip_micro 56.00 vs vip_micro_dec1 45.00"
    assert claims["ah"].measured == "probe: vip_micro 56.00 vs vip_micro_mask50 54.00"
    assert claims["af"].measured == "CIFAR-100 10-shot: vip_micro 56.00 vs vip_micro_b64 51.00"
    assert claims["ai"].measured == "CIFAR-100 10-shot: vip_micro 56.00 vs vip_pico 52.00"


def test_every_claim_fails_when_the_numbers_flip():
    def flipped(backbone: str) -> float:
        return 100.0 - paper_like(backbone)

    reversed_losses = {run: [2.0 - loss for loss in losses] for run, losses in LOSSES.items()}
    found, claims = verdicts(flipped, reversed_losses)
    assert found == dict.fromkeys(TESTED, "inconclusive") | dict.fromkeys(NOT_TESTED, "not tested")
    assert all(claims[k].verdict.estimate < 0 for k in TESTED if k != "y")
    assert claims["y"].verdict.interval.startswith("COCO AP box: -6.00")


def test_three_repeats_of_each_run_decide_the_claims():
    """With 3 runs per DP group ((Syn)-ViP is one fixed model the claims start from), the
    accuracy claims are decided on the paper's pattern; repeats' losses are runs too."""
    losses = {f"{run}{suffix}": values for run, values in LOSSES.items() for suffix in ("", "_r1", "_r2")}
    losses = {run: [v + 0.001 * run.endswith("_r1") for v in values] for run, values in losses.items()}
    found = vip_claims(plan(repeats=3), results(paper_like, repeats=3), losses)
    verdicts = {claim.key: claim.verdict for claim in found}
    assert {k: verdicts[k].verdict for k in "abdfghijk"} == dict.fromkeys("abdfghijk", "held")
    assert verdicts["a"].runs == "3 / fixed" and verdicts["g"].runs == "3 / 3 / 3 / 3"
    assert verdicts["c"].verdict == "held" and verdicts["c"].runs == "3 / 3"


def test_claims_without_their_runs_are_not_tested():
    found, claims = verdicts(paper_like, {}, plan({"dataset_size": [1024]}))
    assert found["h"] == "inconclusive" and claims["h"].verdict.estimate == pytest.approx(3.0)
    assert {found[k] for k in "cdefgijo"} == {"not tested"}
    assert "no result" in claims["c"].verdict.reason or "no runs" in claims["d"].verdict.reason


def test_the_table_says_how_to_read_it():
    frame, title, notes = vip_claims_table(plan(), results(paper_like), LOSSES, "embedded")
    assert len(frame) == len(CATALOGUE.keys()) == 38
    assert list(frame["runs per group"][:2]) == ["1 / fixed", "1 / fixed"]
    assert "ViP claims" in title and any("inconclusive (single run)" in note for note in notes)
    assert frame.loc[0, "paper's effect"] == "5.90" and frame.loc[0, "minimum detectable effect"] != ""


def dense_results(vip: list[float], syn: float, trivial: float) -> dict[str, dict]:
    """Claim y's results: the main ViP and its repeats, (Syn)-ViP once, each task's trivial
    predictor's score beside them (as the COCO and ADE20K jobs write it)."""
    found = results(paper_like, repeats=3)
    runs = ["vip_micro", "vip_micro_r1", "vip_micro_r2"]
    for task, column in (("coco", "COCO AP box"), ("ade20k", "ADE20K mIoU")):
        for backbone, value in [*zip(runs, vip), ("syn_vip_micro", syn)]:
            found[Evaluation(task, backbone).path] = {
                "columns": {column: value},
                "trivial": {"columns": {column: trivial}, "rule": "knows no image"},
            }
    return found


def dense_verdict(vip: list[float], syn: float, trivial: float):
    found = vip_claims(plan(repeats=3), dense_results(vip, syn, trivial), {})
    return next(claim for claim in found if claim.key == "y").verdict


def test_the_dense_claim_is_decided_on_three_repeats_with_the_fine_tunes_noise():
    """(Syn)-ViP is one model, but its one dense fine-tune takes the spread of ViP's three:
    the contrast's SE is sqrt(s^2/3 + s^2) with s = 1, on 2 degrees of freedom (one estimate,
    not two independent ones: with 3.2 Welch df the interval would be narrower)."""
    held = dense_verdict([10.0, 11.0, 12.0], syn=5.0, trivial=1.0)
    assert held.verdict == "held" and held.runs == "COCO AP box: 3 / fixed; ADE20K mIoU: 3 / fixed"
    # t(0.975, 2) = 4.303: 6 +- 4.303 * sqrt(4/3) = [1.03, 10.97]
    assert "+6.00 [+1.03, +10.97]" in held.detail
    # 3.5 points clear ViP's own spread but not the fine-tune noise of (Syn)-ViP's one run
    assert dense_verdict([10.0, 11.0, 12.0], syn=7.5, trivial=1.0).verdict == "inconclusive"
    assert dense_verdict([4.0, 5.0, 6.0], syn=11.0, trivial=1.0).verdict == "not held"


@pytest.mark.parametrize(
    ("vip", "syn", "at"),
    [
        ([1.0, 1.02, 0.98], 1.0, "vip_micro"),  # both arms learnt nothing
        ([10.0, 11.0, 12.0], 0.5, "syn_vip_micro"),  # the worse arm at the trivial predictor: a false held
        ([0.9, 1.0, 1.1], 11.0, "vip_micro"),  # the better arm there: a false not held
    ],
)
def test_a_dense_arm_at_the_trivial_predictors_score_makes_the_claim_uninformative(vip, syn, at):
    verdict = dense_verdict(vip, syn, trivial=1.0)
    assert verdict.verdict == "uninformative"
    assert f"{at} (" in verdict.reason and "within noise of the trivial predictor's score (1 points)" in verdict.reason
