"""What the compute estimates return and read: a job's budget (`JobBudget`: type, network
shape, steps, FLOPs and how they were counted), the facts beyond its params (`Facts`), and
the helpers every estimate shares."""

from __future__ import annotations

from dataclasses import dataclass, field

from dpvip.budget import DP_STEP_TIME_RATIOS
from dpvip.budget.datasets import DatasetSizes
from dpvip.budget.workflow import WorkflowJob
from dpvip.errors import DpvipInputError
from dpvip.models import MAESettings, mae_variant

CPU = "cpu"
JOB_TYPES = {  # short name -> what the tables print
    "syn_vip": "(Syn)-ViP MAE pre-training",
    "dp_mae": "DP-MAE (ViP)",
    "linear_probe": "linear probe",
    "few_shot": "few-shot fine-tuning",
    "coco": "COCO ViTDet",
    "ade20k": "ADE20K UPerNet",
    "dp_finetune": "DP fine-tuning",
    "dprandp_phase1": "DP-RandP Phase I",
    "dprandp_private": "DP-RandP Phases II/III",
    "transfer_features": "feature extraction",
    "mehta_heads": "Mehta et al. heads",
    "dprandp_probe": "DP-RandP private linear probe",
    CPU: "CPU jobs",
}


@dataclass
class JobBudget:
    job: WorkflowJob
    job_type: str
    model: str  # the network's shape, e.g. "base p16 224px"
    steps: int | None = None  # optimizer steps (summed over a grid of runs)
    examples_per_step: float | None = None
    train_flops_per_example: int | None = None  # one training pass (with its clipping, if DP)
    flops: int = 0  # the whole job
    how: str = ""
    unmodelled: str | None = None  # why no FLOPs are given, for a GPU job
    parts: dict = field(default_factory=dict)  # named shares of `flops` (e.g. "phase2")
    units: dict = field(default_factory=dict)  # FLOPs of a unit of its work ("step", "epoch", ...)
    # A DP job's training takes this many times the time its counted FLOPs would at the
    # non-private rate: the measured DP-step time ratio (DP_STEP_TIME_RATIOS) times its
    # non-private training FLOPs over its counted (clipping included) training FLOPs.
    time_factor: float = 1.0

    def flops_of(self, unit: str) -> float | None:
        """FLOPs of one `unit` of the job's work: "run" (the whole job), or one of `units`
        ("step", "epoch", "phase2", "image", "study_run")."""
        return self.flops if unit == "run" else self.units.get(unit)

    @property
    def timed_flops(self) -> float:
        """FLOPs at the non-private rate that take as long as the job: its training's times
        `time_factor`, its evaluation's as counted."""
        evaluation = self.parts.get("evaluation", 0)
        return (self.flops - evaluation) * self.time_factor + evaluation

    def timed_of(self, unit: str) -> float | None:
        """`flops_of(unit)` at the non-private rate (a training unit times `time_factor`)."""
        if unit == "run":
            return self.timed_flops
        flops = self.units.get(unit)
        return None if flops is None else flops * self.time_factor


def dp_time_factor(job_type: str, nonprivate: float, counted: float) -> float:
    """`JobBudget.time_factor` of a DP job type whose training counts `counted` FLOPs and
    would count `nonprivate` without its clipping."""
    return DP_STEP_TIME_RATIOS[job_type] * nonprivate / counted if counted else 1.0


@dataclass
class Facts:
    """What the estimates read beyond a job's params: the workflow's names, dataset sizes."""

    names: dict
    sizes: DatasetSizes

    def mae_settings(self, backbone: str, image_size: int | None = None) -> MAESettings:
        """The MAE a backbone of the workflow was trained as (`mae_shapes` of common.smk), at
        `image_size` if given."""
        shapes = self.names["mae_shapes"]()
        if backbone not in shapes:
            raise DpvipInputError(f"backbone '{backbone}' is not an MAE of this workflow")
        model, trained_size, patch = shapes[backbone]
        size, decoder_depth = mae_variant(model)
        return MAESettings(size, image_size=image_size or trained_size, patch_size=patch, decoder_depth=decoder_depth)


def shape_of(settings: MAESettings) -> str:
    """An MAE's shape as the tables print it, e.g. "base p16 224px"."""
    return f"{settings.size} p{settings.patch_size} {settings.image_size}px"


def with_evaluation(budget: JobBudget, images: int, forward: int) -> JobBudget:
    """`budget` with its evaluation pass (`images` x `forward` FLOPs) added as a named part."""
    budget.parts["evaluation"] = images * forward
    budget.flops += images * forward
    return budget


def unmodelled(job: WorkflowJob, job_type: str, why: str) -> JobBudget:
    """The row of a GPU job without a FLOP model here, saying why."""
    return JobBudget(job, job_type, "", how=why, unmodelled=why)
