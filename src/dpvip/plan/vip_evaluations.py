"""The evaluation jobs the ViP tables and figures need (torch-free: the workflow knows every
job, and checks the `evaluate` config, before anything runs).

An `Evaluation` is one task on one backbone (and dataset, and K for few-shot); its result
is `results/evaluate/<path>.json`, whose `columns` ({column: value}) fill table cells. The
jobs are exactly those some table or figure cell asks for (`dpvip.plan.vip_rows`), so a
table rebuilt alone runs only what it shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dpvip.errors import DpvipInputError
from dpvip.models import mae_parameters, mae_size, mae_variant
from dpvip.privacy import run_options
from dpvip.plan.examples import check_planned_run, examples_source, planned_examples
from dpvip.plan.vip_rows import PROBE_COLUMN, VIP_TABLES, Backbones, figure5_backbones, table_rows
from dpvip.plan.vip_runs import REPEAT

TASKS = ("linear_probe", "few_shot", "coco", "ade20k", "dp_finetune")
SHOT_COLUMN = re.compile(r"^(?P<dataset>.+) (?P<shots>\d+)-shot$")
COCO_COLUMNS = ("COCO AP box", "COCO AP mask")
ADE_COLUMN = "ADE20K mIoU"
DP_FINETUNE_COLUMNS = ("Top-1 Accuracy", "epsilon", "delta")
# What the detectron2 backend reads of evaluate.coco (its config file sets the schedule, sizes
# and learning rate; `detectron2.overrides` changes them)
DETECTRON2_READS = ("backend", "source", "root", "detectron2", "score_threshold", "processes", "nodes")
DETECTRON2_PATCH = 16  # ViTDet's simple feature pyramid and its anchors assume stride-16 features
RUN_FACTS = ("Batch Size", "# Train data", "Noise sigma", "decoder depth", "masking ratio", "# parameters")


@dataclass(frozen=True, order=True)
class Evaluation:
    task: str
    backbone: str
    dataset: str | None = None
    shots: int | None = None

    @property
    def path(self) -> str:
        """Where its result lives, relative to results/evaluate (without .json)."""
        if self.task == "few_shot":
            return f"few_shot/{self.backbone}/{self.dataset}_{self.shots}shot"
        if self.dataset is not None:
            return f"{self.task}/{self.backbone}/{self.dataset}"
        return f"{self.task}/{self.backbone}"

    @property
    def is_cnn(self) -> bool:
        return self.backbone.startswith("cnn_")


@dataclass(frozen=True)
class EvaluationPlan:
    section: dict  # the config's `evaluate`
    backbones: Backbones
    privacy: dict | None = None  # the config's `privacy` (DP fine-tuning takes its run options)

    def __post_init__(self) -> None:
        datasets = self.section.get("datasets", {})
        for task, used in (
            ("linear_probe", self.probe_datasets),
            ("few_shot", list(self.shot_datasets)),
            ("dp_finetune", [self.dp_dataset] if self.dp_dataset else []),
        ):
            for name in used:
                if name not in datasets:
                    raise DpvipInputError(
                        f"evaluate.{task} uses dataset '{name}', which evaluate.datasets does not define "
                        f"(known: {', '.join(datasets) or 'none'})"
                    )
        self._check_dp_finetune_size(datasets)
        known = [
            *(f"syn_vip_{size}" for size in self.backbones.syn_vip),
            *self.backbones.runs,
            *(f"cnn_{arch}" for arch in self.backbones.baselines.values()),
        ]
        for task in TASKS:
            for name in self.section.get(task, {}).get("backbones") or []:
                if name not in known:
                    raise DpvipInputError(
                        f"evaluate.{task}.backbones names '{name}', which is not a model the workflow trains "
                        f"(known: {', '.join(known)})"
                    )

    def _check_dp_finetune_size(self, datasets: dict) -> None:
        """batch <= n and delta < 1/n where the dataset's entry fixes n (the job checks the rest)."""
        examples = planned_examples(datasets.get(self.dp_dataset)) if self.dp_dataset else None
        if examples is None:
            return
        section = self.section["dp_finetune"]
        delta = section.get("delta")
        check_planned_run(  # without a delta, the job's is 1/(2n)
            examples_source(datasets[self.dp_dataset], f"evaluate.datasets.{self.dp_dataset}"),
            examples,
            run_options(self.privacy)["allow_large_delta"],
            batch=("evaluate.dp_finetune.batch_size", section.get("batch_size")),
            delta=("evaluate.dp_finetune.delta", None if delta is None else float(delta)),
        )

    @property
    def probe_datasets(self) -> list[str]:
        return list(self.section.get("linear_probe", {}).get("datasets", []))

    @property
    def shot_datasets(self) -> dict[str, list[int]]:
        return dict(self.section.get("few_shot", {}).get("datasets", {}))

    @property
    def dp_dataset(self) -> str | None:
        return self.section.get("dp_finetune", {}).get("dataset")

    def job_section(self, evaluation: Evaluation) -> dict:
        """The part of the `evaluate` config that `evaluation` reads."""
        datasets = self.section.get("datasets", {})
        used = {evaluation.dataset: datasets[evaluation.dataset]} if evaluation.dataset else {}
        task = {key: value for key, value in self.section.get(evaluation.task, {}).items() if key != "backbones"}
        if evaluation.task == "coco" and task.get("backend") == "detectron2":
            # detectron2's own config sets the rest: a change to them must not rerun the job
            task = {key: value for key, value in task.items() if key in DETECTRON2_READS}
        part = {"image_size": self.section.get("image_size"), "datasets": used, evaluation.task: task}
        if evaluation.task in ("coco", "ade20k"):  # their stand-in
            part["shapes"] = self.section.get("shapes", {})
            run = self.backbones.runs.get(evaluation.backbone)
            if run is not None and run.ablation == REPEAT:
                # a repeat's fine-tune draws its own order, flips and heads, so that the spread
                # of the repeats holds the fine-tune's noise too, not only the pre-training's
                part[evaluation.task] = task | {"seed": int(task.get("seed", 0)) + int(run.point)}
        if evaluation.task == "dp_finetune":
            part["dp_finetune"] = dict(part["dp_finetune"]) | run_options(self.privacy)
        return part

    def evaluation(self, backbone: str, metric: str) -> Evaluation | None:
        """The job that measures `metric` of `backbone`; None for a run fact or a metric the
        config does not evaluate, or a backbone its task's `backbones` leaves out (the cell
        stays empty, the paper's value beside it)."""
        found = self._evaluation(backbone, metric)
        listed = self.section.get(found.task, {}).get("backbones") if found else None
        return found if listed is None or backbone in listed else None

    def _evaluation(self, backbone: str, metric: str) -> Evaluation | None:
        cnn = backbone.startswith("cnn_")
        shot = SHOT_COLUMN.match(metric)
        if shot and int(shot["shots"]) in self.shot_datasets.get(shot["dataset"], []):
            return Evaluation("few_shot", backbone, shot["dataset"], int(shot["shots"]))
        if cnn:  # the CNN baselines are fine-tuned only (ViP Table 2)
            return None
        if metric in self.probe_datasets:
            return Evaluation("linear_probe", backbone, metric)
        if metric in COCO_COLUMNS and self.section.get("coco"):
            return Evaluation("coco", backbone)
        if metric == ADE_COLUMN and self.section.get("ade20k"):
            return Evaluation("ade20k", backbone)
        if metric in DP_FINETUNE_COLUMNS and self.dp_dataset:
            return Evaluation("dp_finetune", backbone, self.dp_dataset)
        return None

    def table_evaluations(self, table: str, columns: list[str]) -> list[Evaluation]:
        cells = [cell for row in table_rows(table, columns, self.backbones) for cell in row.cells.values()]
        return sorted({e for e in (self.evaluation(b, m) for b, m in cells) if e is not None})

    def figure_evaluations(self, figure: str) -> list[Evaluation]:
        if figure == "vip_figure1":  # linear probing of our largest ViP; COCO of the main ViP
            largest = self.largest_vip()
            wanted = [(largest, d) for d in self.probe_datasets] + [(self.backbones.main_vip, c) for c in COCO_COLUMNS]
        elif figure == "vip_figure5":
            wanted = [
                (b, m)
                for runs in figure5_backbones(self.backbones).values()
                for b in runs
                for m in self.figure5_metrics()
            ]
        else:
            raise KeyError(f"no evaluations for figure {figure}")
        return sorted({e for e in (self.evaluation(b, m) for b, m in wanted) if e is not None})

    def claim_metrics(self, main: bool, few_shot: bool = False) -> list[str]:
        """What ViP's claims read of a run: the first probe; the fewest shots (claim b) of the
        main ViP and of the runs the few-shot claims compare (`few_shot`: ae, af, ai, see
        `few_shot_claim_runs`); for the main ViP also DP fine-tuning's top-1 (claim k) and
        the dense scores (claim y)."""
        shots, dataset = self.claim_shots()
        shot = [f"{dataset} {shots}-shot"] if shots and (main or few_shot) else []
        if not main:
            return self.probe_datasets[:1] + shot
        return self.probe_datasets[:1] + shot + ["Top-1 Accuracy", COCO_COLUMNS[0], ADE_COLUMN]

    def claim_shots(self) -> tuple[int | None, str | None]:
        """(shots, dataset) of the few-shot cell claim b compares: the fewest shots."""
        cells = [(shots, dataset) for dataset, every in self.shot_datasets.items() for shots in every]
        return min(cells) if cells else (None, None)

    def repeat_evaluations(self) -> list[Evaluation]:
        """The evaluations of the runs' repeats that the claims compare (the first runs'
        evaluations are the tables' own)."""
        repeats = [run for run in self.backbones.runs.values() if run.ablation == REPEAT]
        few_shot = self.few_shot_claim_runs()
        wanted = [
            (run.name, metric)
            for run in repeats
            for metric in self.claim_metrics(run.repeat_of == self.backbones.main_vip, run.repeat_of in few_shot)
        ]
        return sorted({e for e in (self.evaluation(b, m) for b, m in wanted) if e is not None})

    def few_shot_claim_runs(self) -> set[str]:
        """The runs ViP's few-shot claims compare with each other or the main ViP: the smallest
        dataset (ae) and batch (af) of their ablations, the smallest and the largest model of
        the synthetic-init line (ai)."""
        picked = {extreme_run(self.backbones, ablation) for ablation in ("dataset_size", "batch_size")}
        synthetic = by_size(figure5_backbones(self.backbones)["(Syn)-ViP init"], self.backbones)
        if len(synthetic) >= 2:
            picked |= {synthetic[0], synthetic[-1]}
        return picked - {None}

    def figure5_metrics(self) -> list[str]:
        """The ImageNet-1K probe (or the first probed set) and the first few-shot setting."""
        probe = (
            [PROBE_COLUMN if PROBE_COLUMN in self.probe_datasets else self.probe_datasets[0]]
            if self.probe_datasets
            else []
        )
        shots = [f"{d} {k[0]}-shot" for d, k in list(self.shot_datasets.items())[:1] if k]
        return probe + shots

    def largest_vip(self) -> str:
        """The main-recipe ViP run with the most encoder parameters (ViP-Large in Figure 1)."""

        def width_depth(name: str) -> tuple[int, int]:
            size = mae_size(mae_variant(self.backbones.runs[name].model)[0])
            return size.encoder_width * size.encoder_depth, size.encoder_width

        candidates = [run.name for run in self.backbones.runs.values() if run.ablation in ("main", "model_size")]
        return max(candidates, key=width_depth)


def check_detectron2(section: dict, evaluations: list[Evaluation], patch_sizes: dict[str, int]) -> None:
    """Refuse at plan time what the detectron2 COCO backend would refuse in its job: more than
    one process (it starts detectron2.gpus itself) and an encoder whose patch is not 16
    (`patch_sizes`: {backbone: patch size}; the evaluated backbones of the config)."""
    coco = section.get("coco") or {}
    if coco.get("backend") != "detectron2":
        return
    for key in ("processes", "nodes"):
        if int(coco.get(key, 1)) != 1:
            raise DpvipInputError(
                f"evaluate.coco.{key} is {coco[key]}: backend detectron2 starts its own processes "
                f"(evaluate.coco.detectron2.gpus), so its job runs as one process on one node"
            )
    for evaluation in evaluations:
        patch = patch_sizes.get(evaluation.backbone)
        if evaluation.task == "coco" and patch is not None and patch != DETECTRON2_PATCH:
            raise DpvipInputError(
                f"evaluate.coco.backend detectron2 needs encoders of patch size {DETECTRON2_PATCH} (ViTDet's "
                f"pyramid and anchors assume it); {evaluation.backbone} has patch size {patch}: use backend "
                "torchvision, or pre-train with patch_size 16"
            )


def all_evaluations(plan: EvaluationPlan, table_columns: dict[str, list[str]]) -> dict[str, list[Evaluation]]:
    """{table or figure: its evaluations} for every ViP table and figure."""
    needs = {table: plan.table_evaluations(table, table_columns[table]) for table in VIP_TABLES}
    for figure in ("vip_figure1", "vip_figure5"):
        needs[figure] = plan.figure_evaluations(figure)
    needs["vip_claims"] = plan.repeat_evaluations()
    return needs


def by_size(names: list[str], backbones: Backbones) -> list[str]:
    """DP runs from the fewest encoder parameters to the most."""
    return sorted(names, key=lambda name: mae_parameters(mae_variant(backbones.runs[name].model)[0]))


def extreme_run(backbones: Backbones, ablation: str, lowest: bool = True) -> str | None:
    """The ablation run at its smallest (or largest) point."""
    runs = sorted(backbones.of(ablation), key=lambda run: run.point)
    return (runs[0] if lowest else runs[-1]).name if runs else None
