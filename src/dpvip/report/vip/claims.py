"""ViP's comparative claims, checked on our runs (the catalogue is
config/paper_values/claims/vip.yaml).

Our numbers come from the evaluation results (accuracy with its test-set size) and from the
DP-MAE runs' logged training losses (a run's final loss: the mean of the last quarter of its
logged steps). Every comparison is between runs the tables and figures already train: a
claim whose runs this configuration does not have is `not tested`. There is one pre-training
run per model (a run per seed would multiply the cost of the whole ViP stage), so every
verdict here is `inconclusive (single run)` with its power stated: the accuracy intervals
assume the run-to-run spread of our DP-RandP runs, and a single run's loss has none.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd

from dpvip.models import mae_size, mae_variant
from dpvip.plan.vip_evaluations import Evaluation, EvaluationPlan, by_size, extreme_run
from dpvip.plan.vip_rows import Backbones, figure5_backbones
from dpvip.plan.vip_runs import repeats_of
from dpvip.report.claims.chance import classes_of
from dpvip.report.claims.catalogue import DIFFERENCE, POWER_NOTE, TEST_NOTE, Catalogue, Claim, claims_frame, ordered
from dpvip.per_example import PER_EXAMPLE
from dpvip.report.claims.contrasts import paired_runs
from dpvip.report.claims.verdicts import Group, across, judge

TITLE = "ViP claims: do the paper's qualitative findings hold on our runs?"
LOSS_TAIL = 0.25  # the last quarter of a run's logged steps stands for its final loss

NOT_HERE = {
    "l": "no SimCLR weights offline: Table 1's SimCLR row is not run here",
    "m": "DP-NFNet and TAN are not available here (their rows keep the paper's values only)",
    "al": "DP-NFNet and TAN are not available here, and no ViP is pre-trained on ImageNet (only on the LAION stand-in)",
    "n": "no SimCLR, Mask R-CNN or MAE COCO baselines here; our COCO is a generated stand-in",
    "s": "DP-NFNet and TAN are not available here (their rows keep the paper's values only)",
    "t": "no AlexNet here (evaluate.few_shot.baselines runs a ResNet-50 only: AlexNet takes a CPU minute per "
    "learning rate), and the claim is one of equal accuracy, where the verdicts test a direction",
    "u": "no ViP DP-trained on an ImageNet-1k stand-in here (dp_pretrain.dataset is the LAION stand-in only)",
    "v": "TAN and AlexNet are not run here (Table 2's only baseline is a ResNet-50 in SimCLR's row)",
    "w": "no SimCLR weights offline: Table 2's SimCLR row is a ResNet-50 stand-in (evaluate.few_shot.baselines), "
    "not SimCLR pre-training",
    "x": "TAN is not available here (Table 2 keeps its published values)",
    "z": "TAN, DP-NFNet and DP-ResNet-18 are not available here (Table 5 keeps their published values)",
    "aa": "no non-private (sigma 0) DP-MAE run in this configuration (Table 6's MAE row)",
    "ab": "one LAION stand-in here: no de-duplicated second set to compare",
    "ac": "no non-private (sigma 0) DP-MAE run in this configuration (Table 7's MAE row)",
    "aj": "no epsilon = inf (sigma 0) run in this configuration (dp_pretrain.ablations.epsilon)",
}
# the ablations whose extremes Table 10 and Table 8 compare: (claim, ablation, setting, main's value)
ABLATION_CLAIMS = (("h", "dataset_size", "examples", math.inf), ("i", "batch_size", "batch_size", None))
ABLATION_CLAIMS += (("j", "epsilon", "epsilon", 8.0),)


class _Runs:
    """Our numbers by backbone: probe, few-shot and DP fine-tuning accuracies, DP losses."""

    def __init__(self, plan: EvaluationPlan, results: dict[str, dict], losses: dict[str, list[float]]):
        self.plan, self.results, self.losses = plan, results, losses
        self.shots, self.shot_dataset = plan.claim_shots()

    def _runs(self, backbone: str) -> list[str]:
        """A DP run and its repeats (independent runs of a group); a (Syn)-ViP model alone."""
        return repeats_of(self.plan.backbones.runs, backbone) if backbone in self.plan.backbones.runs else [backbone]

    def _found(self, backbone: str, evaluation) -> list[dict]:
        """The results of `evaluation(run)` for the run and each repeat that has one."""
        found = [self.results.get(evaluation(run).path) for run in self._runs(backbone)]
        return [result for result in found if result is not None]

    def _accuracy(self, backbone: str, evaluation, column: str) -> Group:
        found = self._found(backbone, evaluation)
        if not found:
            return Group(())
        data = found[0].get("data", {})
        classes = classes_of(
            evaluation(backbone).dataset or "", data.get("classes_tested") or data.get("classes"), data.get("stand_in")
        )
        values = [result["columns"].get(column) for result in found]
        records = [result.get(PER_EXAMPLE, {}).get(column) for result in found]
        chance = 100.0 / classes if classes else None
        return Group.of(
            values, data.get("test"), chance, fixed=_fixed(backbone), label=backbone, **paired_runs(records)
        )

    def probe(self, backbone: str) -> Group:
        dataset = next(iter(self.plan.probe_datasets), None)
        return self._accuracy(backbone, lambda run: Evaluation("linear_probe", run, dataset), dataset or "")

    def few_shot(self, backbone: str) -> Group:
        column = f"{self.shot_dataset} {self.shots}-shot"
        return self._accuracy(backbone, lambda run: Evaluation("few_shot", run, self.shot_dataset, self.shots), column)

    def dense(self, task: str, column: str, backbone: str) -> Group:
        """A COCO AP or ADE20K mIoU (points) of the run and of each repeat evaluated: one value
        per run, not a binomial accuracy; the trivial predictor's score is its chance level."""
        found = self._found(backbone, lambda run: Evaluation(task, run))
        trivial = next((r["trivial"]["columns"].get(column) for r in found if "trivial" in r), None)
        return Group.of(
            [r["columns"].get(column) for r in found], chance=trivial, fixed=_fixed(backbone), label=backbone
        )

    def dp_finetune(self, backbone: str) -> Group:
        return self._accuracy(
            backbone, lambda run: Evaluation("dp_finetune", run, self.plan.dp_dataset), "Top-1 Accuracy"
        )

    def loss(self, run: str) -> Group:
        """The final loss of the run and of each repeat (one value per run: never its logged
        steps as if they were runs)."""
        finals = []
        for name in self._runs(run):
            logged = self.losses.get(name, [])
            tail = logged[-max(1, math.ceil(len(logged) * LOSS_TAIL)) :]
            finals += [sum(tail) / len(tail)] if tail else []
        return Group.of(finals)


def _fixed(backbone: str) -> bool:
    """(Syn)-ViP is one non-private model that the claims start from: fixed, not a sample of runs."""
    return not backbone.startswith("vip_")


def _fmt(group: Group) -> str:
    return "—" if not group.values else f"{group.mean:.2f}"


CATALOGUE = Catalogue.of("vip")
_claim = CATALOGUE.judged


def _absent(key: str, reason: str = "this configuration has no runs for it") -> Claim:
    return CATALOGUE.untested(key, reason)


def _versus(key: str, measure, better: str, worse: str, label: str) -> Claim:
    """`better` beats `worse` on `measure` (an accuracy, or minus a loss)."""
    groups = {"better": measure(better), "worse": measure(worse)}
    measured = f"{label}: {better} {_fmt(groups['better'])} vs {worse} {_fmt(groups['worse'])}"
    return _claim(key, groups, measured)


def _lower_loss(key: str, ours: _Runs, lower: str, higher: str) -> Claim:
    groups = {"better": ours.loss(higher), "worse": ours.loss(lower)}  # the claim: higher - lower > 0
    measured = f"final DP loss: {lower} {_fmt(groups['worse'])} vs {higher} {_fmt(groups['better'])}"
    return _claim(key, groups, measured)


def vip_claims(plan: EvaluationPlan, results: dict[str, dict], losses: dict[str, list[float]]) -> list[Claim]:
    ours, backbones = _Runs(plan, results, losses), plan.backbones
    syn, vip = backbones.main_syn, backbones.main_vip
    claims = [
        _versus("a", ours.probe, vip, syn, "probe"),
        _versus("b", ours.few_shot, vip, syn, f"{ours.shot_dataset} {ours.shots}-shot"),
        _versus("k", ours.dp_finetune, vip, syn, "DP fine-tuning top-1"),
        *(_absent(key, reason) for key, reason in NOT_HERE.items()),
    ]
    random_main = next((run.name for run in backbones.of("random_init") if run.model == backbones.anchor), None)
    if random_main:
        claims += [_lower_loss("c", ours, vip, random_main), _versus("d", ours.probe, vip, random_main, "probe")]
    else:
        claims += [_absent("c"), _absent("d")]
    lines = figure5_backbones(backbones)
    synthetic, random = (by_size(lines[line], backbones) for line in ("(Syn)-ViP init", "random init"))
    if len(synthetic) >= 2:
        small, large = synthetic[0], synthetic[-1]
        claims += [_lower_loss("e", ours, large, small), _versus("f", ours.probe, large, small, "probe")]
    else:
        claims += [_absent("e"), _absent("f")]
    gains_more = {"syn_large": 1, "syn_small": -1, "rand_large": -1, "rand_small": 1}
    claims.append(_size_gap("g", ours.probe, "probe", synthetic, random, gains_more))
    shorter = backbones.of("synthetic_epochs")
    if shorter:
        shortest = min(shorter, key=lambda run: run.point)
        claims.append(_lower_loss("o", ours, backbones.main_vip, shortest.name))
    else:
        claims.append(_absent("o"))
    claims += [
        _ablation_claim(key, ablation, setting, main, backbones, ours)
        for key, ablation, setting, main in ABLATION_CLAIMS
    ]
    claims += _ablation_runs_claims(ours, backbones)
    claims.append(_deeper_decoder_claim(ours, backbones))
    # claim r: the larger model's loss advantage is larger from the synthetic start than from random
    loses_more = {"syn_small": 1, "syn_large": -1, "rand_small": -1, "rand_large": 1}
    claims += [
        _size_gap("r", ours.loss, "final DP loss", synthetic, random, loses_more),
        _syn_scaling(ours, backbones),
        _dense_claim(ours, syn, vip),
    ]
    if len(synthetic) >= 2:
        claims.append(
            _versus("ai", ours.few_shot, synthetic[-1], synthetic[0], f"{ours.shot_dataset} {ours.shots}-shot")
        )
    else:
        claims.append(_absent("ai"))
    return ordered(claims)


def _ablation_runs_claims(ours: _Runs, backbones: Backbones) -> list[Claim]:
    """The main run against one ablation run: lower loss with more data (p) and a larger
    batch (q); better 10-shot fine-tuning with both (ae, af); a better probe than a shallower
    decoder (ag) and a smaller masking ratio (ah)."""
    vip, claims = backbones.main_vip, []
    shots = f"{ours.shot_dataset} {ours.shots}-shot"
    for key, ablation, kind in (
        ("p", "dataset_size", "loss"),
        ("q", "batch_size", "loss"),
        ("ae", "dataset_size", "few_shot"),
        ("af", "batch_size", "few_shot"),
        ("ag", "decoder_depth", "probe"),
        ("ah", "mask_ratio", "probe"),
    ):
        other = extreme_run(backbones, ablation)
        if other is None:
            claims.append(_absent(key))
        elif kind == "loss":
            claims.append(_lower_loss(key, ours, vip, other))
        elif kind == "few_shot":
            claims.append(_versus(key, ours.few_shot, vip, other, shots))
        else:
            claims.append(_versus(key, ours.probe, vip, other, "probe"))
    return claims


def _deeper_decoder_claim(ours: _Runs, backbones: Backbones) -> Claim:
    """Claim ak: the main run's probe against a decoder deeper than the main run's."""
    size, depth = mae_variant(backbones.runs[backbones.main_vip].model)
    depth = depth or mae_size(size).decoder_depth
    deeper = [run for run in backbones.of("decoder_depth") if run.point > depth]
    if not deeper:
        return _absent(
            "ak", f"no decoder deeper than the main run's {depth} here (dp_pretrain.ablations.decoder_depth)"
        )
    deepest = max(deeper, key=lambda run: run.point).name
    return _versus("ak", ours.probe, backbones.main_vip, deepest, "probe")


def _syn_scaling(ours: _Runs, backbones: Backbones) -> Claim:
    """Claim ad: ViP's probe gains more from the largest over the smallest size than (Syn)-ViP's."""
    sized = {
        run.model: run.name
        for run in backbones.runs.values()
        if run.ablation in ("main", "model_size") and run.model in backbones.syn_vip
    }
    if len(sized) < 2:
        return _absent("ad", "no (Syn)-ViP and ViP pair at a second model size in this configuration")
    order = by_size(list(sized.values()), backbones)
    small, large = (backbones.runs[name].model for name in (order[0], order[-1]))
    names = {
        "vip_small": sized[small],
        "vip_large": sized[large],
        "syn_small": f"syn_vip_{small}",
        "syn_large": f"syn_vip_{large}",
    }
    groups = {key: ours.probe(name) for key, name in names.items()}
    measured = f"probe, {small} -> {large}: " + "; ".join(
        f"{line} {_fmt(groups[f'{tag}_small'])} -> {_fmt(groups[f'{tag}_large'])}"
        for line, tag in (("ViP", "vip"), ("(Syn)-ViP", "syn"))
    )
    return _claim("ad", groups, measured, {"vip_large": 1, "vip_small": -1, "syn_large": -1, "syn_small": 1})


def _dense_claim(ours: _Runs, syn: str, vip: str) -> Claim:
    """Claim y: ViP over (Syn)-ViP on COCO (AP box) and ADE20K (mIoU), one part each."""
    parts, measured = {}, []
    for task, column, effect in (("coco", "COCO AP box", 45.2 - 45.0), ("ade20k", "ADE20K mIoU", 40.1 - 38.8)):
        better, worse = ours.dense(task, column, vip), ours.dense(task, column, syn)
        if worse.fixed and better.runs >= 2:
            # (Syn)-ViP is one model, but its dense fine-tune is as noisy as ViP's: its one run
            # takes the spread of ViP's runs (which adds pre-training noise: the safe side)
            worse = replace(worse, spread=better.values)
        groups = {"better": better, "worse": worse}
        if groups["better"].values and groups["worse"].values:
            parts[column] = judge(groups, DIFFERENCE, effect)
            measured.append(f"{column}: {vip} {_fmt(groups['better'])} vs {syn} {_fmt(groups['worse'])}")
    if not parts:
        return _absent("y", "no COCO or ADE20K evaluation of both backbones in this configuration")
    return CATALOGUE.claim("y", "; ".join(measured), across(parts))


def _size_gap(key: str, measure, label: str, synthetic: list[str], random: list[str], contrast: dict) -> Claim:
    """A claim on the smallest -> largest change along the synthetic-init and the random-init
    lines (claim g on the probe, claim r on the final loss)."""
    if len(synthetic) < 2 or len(random) < 2:
        return _absent(key)
    names = {"syn_small": synthetic[0], "syn_large": synthetic[-1], "rand_small": random[0], "rand_large": random[-1]}
    groups = {name: measure(run) for name, run in names.items()}
    measured = f"{label}, smallest -> largest: " + "; ".join(
        f"{line} {names[f'{tag}_small']} {_fmt(groups[f'{tag}_small'])} -> "
        f"{names[f'{tag}_large']} {_fmt(groups[f'{tag}_large'])}"
        for line, tag in (("synthetic", "syn"), ("random", "rand"))
    )
    return _claim(key, groups, measured, contrast)


def _ablation_claim(key: str, ablation: str, setting: str, main_value, backbones: Backbones, ours: _Runs) -> Claim:
    """The ablation's largest setting against its smallest, the main run among them."""
    runs = backbones.of(ablation)
    if not runs:
        return _absent(key)
    main = backbones.runs[backbones.main_vip]
    points = [(run.values.get(setting), run.name) for run in runs]
    points.append((main.values.get(setting, main_value), main.name))
    points.sort(key=lambda point: point[0])
    return _versus(key, ours.probe, points[-1][1], points[0][1], "probe")


def vip_claims_table(
    plan: EvaluationPlan, results: dict[str, dict], losses: dict[str, list[float]], scale: str
) -> tuple[pd.DataFrame, str, list[str]]:
    repeats = len(repeats_of(plan.backbones.runs, plan.backbones.main_vip))
    runs = (
        "One pre-training run per model, so every comparison is inconclusive (single run). Accuracy intervals "
        "assume our DP-RandP runs' run-to-run spread"
        if repeats == 1
        else f"{repeats} independent pre-training runs per DP model (fresh keys, dp_pretrain.repeats); "
        "(Syn)-ViP is one given model (test-set noise only)"
    )
    notes = [
        f"Scale: {scale}. Our runs are the ViP tables' and figures' own (stand-ins as their notes say).",
        f"{runs}; a final loss (the mean of the last "
        f"{LOSS_TAIL:.0%} of a run's logged steps) is one value per run and has no interval.",
        TEST_NOTE,
        POWER_NOTE,
    ]
    return claims_frame(vip_claims(plan, results, losses)), TITLE, notes
