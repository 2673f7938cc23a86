"""One job's compute: its type, its network's shape, its planned steps and its FLOPs.

Each GPU rule has a function that reads the job's params (what its script receives) and
the workflow's plan, and counts what the job's code runs: per example (or image, or step)
FLOPs from `dpvip.budget.networks`, times the examples the plan gives it (epochs x examples,
DP steps x expected batch, iterations x batch, grid points...), plus its evaluation passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dpvip.budget import DP_STEP_TIME_RATIOS, networks
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


def _shape(settings: MAESettings) -> str:
    return f"{settings.size} p{settings.patch_size} {settings.image_size}px"


def _with_evaluation(budget: JobBudget, images: int, forward: int) -> JobBudget:
    budget.parts["evaluation"] = images * forward
    budget.flops += images * forward
    return budget


# --- pre-training -------------------------------------------------------------------------------
def _syn_vip(job: WorkflowJob, facts: Facts) -> JobBudget:
    from dpvip.plan.pretrain import PretrainSettings, training_values

    section = job.params["settings"]
    settings = PretrainSettings.from_config(training_values(section), job.params["size"])
    images = facts.names["SYNTHETIC_SPECS"][section["dataset"]].images
    steps = settings.epochs * (images // settings.batch_size)
    per_example = networks.mae_pretraining(settings.model).train
    step = settings.batch_size * per_example
    return JobBudget(
        job,
        "syn_vip",
        _shape(settings.model) + f" mask {settings.model.mask_ratio}",
        steps,
        settings.batch_size,
        per_example,
        steps * settings.batch_size * per_example,
        f"{settings.epochs} epochs x {images // settings.batch_size} steps of {settings.batch_size} images",
        units={"step": step, "epoch": step * (images // settings.batch_size)},
    )


def _dp_mae(job: WorkflowJob, facts: Facts) -> JobBudget:
    from dpvip.plan.dp_pretrain import DPPretrainSettings

    settings = DPPretrainSettings.from_config(job.params["settings"], job.params["model"])
    per_example = networks.mae_dp_pretraining(settings.model).train
    nonprivate = networks.mae_pretraining(settings.model).train
    depth = settings.model.decoder_depth
    return JobBudget(
        job,
        "dp_mae",
        _shape(settings.model) + f" mask {settings.model.mask_ratio}" + (f" dec{depth}" if depth else ""),
        settings.steps,
        settings.batch_size,
        per_example,
        settings.steps * settings.batch_size * per_example,
        f"{settings.steps} DP steps x expected batch {settings.batch_size}, per-example clipping counted",
        units={"step": settings.batch_size * per_example},
        time_factor=dp_time_factor("dp_mae", nonprivate, per_example),
    )


# --- ViP evaluations ----------------------------------------------------------------------------
def _feature_choice(options: dict):
    from dpvip.evaluate.features import FeatureChoice

    return FeatureChoice(**options.get("features", {}))


def _linear_probe(job: WorkflowJob, facts: Facts) -> JobBudget:
    evaluation, section = job.params["evaluation"], job.params["section"]
    options = section["linear_probe"]
    data = facts.sizes.of(evaluation.dataset, section["datasets"][evaluation.dataset])
    mae = facts.mae_settings(evaluation.backbone, section["image_size"])
    encoder = networks.mae_features(mae, "prelogits")
    choice = _feature_choice(options)
    head = networks.linear_head(choice.width(encoder.width), data.classes, private=False)
    grid = len(options["blrs"])
    seen = options["epochs"] * data.train * grid  # examples through the head
    encoded = seen if options.get("augment", True) else data.train  # augmented: the encoder every epoch
    budget = JobBudget(
        job,
        "linear_probe",
        _shape(mae),
        options["epochs"] * math.ceil(data.train / options["batch_size"]) * grid,
        options["batch_size"],
        head.train,
        encoded * encoder.forward + seen * head.train,
        f"{grid} blrs x {options['epochs']} epochs of {data.train} images"
        + (", each through the frozen encoder" if options.get("augment", True) else ", features once"),
    )
    return _with_evaluation(budget, data.test, encoder.forward)


def _few_shot(job: WorkflowJob, facts: Facts) -> JobBudget:
    evaluation, section = job.params["evaluation"], job.params["section"]
    options = section["few_shot"]
    data = facts.sizes.of(evaluation.dataset, section["datasets"][evaluation.dataset])
    if evaluation.is_cnn:
        arch = evaluation.backbone.removeprefix("cnn_")
        size = next((b.get("image_size") for b in options["baselines"].values() if b["arch"] == arch), None)
        size = size or section["image_size"]
        network, model, grid = networks.cnn(arch, data.classes, size), f"{arch} {size}px", len(options["cnn_lrs"])
    else:
        mae = facts.mae_settings(evaluation.backbone, section["image_size"])
        choice = _feature_choice(options)
        network = networks.mae_classifier(
            mae, data.classes, choice.pooling, choice.last_blocks, choice.final_norm, private=False
        )
        model, grid = _shape(mae), len(options["lrs"])
    train = evaluation.shots * data.classes
    batch = min(options["batch_size"], train)
    budget = JobBudget(
        job,
        "few_shot",
        model,
        grid * options["epochs"] * math.ceil(train / batch),
        batch,
        network.train,
        grid * options["epochs"] * train * network.train,
        f"{grid} lrs x {options['epochs']} epochs of {evaluation.shots} x {data.classes} images",
    )
    return _with_evaluation(budget, grid * data.test, network.forward)


def _coco(job: WorkflowJob, facts: Facts) -> JobBudget:
    evaluation, section = job.params["evaluation"], job.params["section"]
    options = section["coco"]
    data = facts.sizes.task("coco", section)
    mae = facts.mae_settings(evaluation.backbone)  # loaded at its own size, rebuilt at image_size
    size, channels = options.get("image_size", 1024), options.get("pyramid_channels", 256)
    network = networks.vitdet(mae, size, data.classes, channels, options.get("head_convs", 4))
    iterations, batch = options.get("iterations", 184_375), options.get("batch_size", 64)
    backend = options.get("backend", "torchvision")
    budget = JobBudget(
        job,
        "coco",
        f"ViTDet {mae.size} p{mae.patch_size} {size}px",
        iterations,
        batch,
        network.train,
        iterations * batch * network.train,
        f"{iterations} iterations x {batch} images; pyramid, RPN, box head on the sampled RoIs, mask head"
        + ("" if backend == "torchvision" else " (our torchvision model: taken as the detectron2 backend's cost)"),
    )
    return _with_evaluation(budget, data.test, network.forward)


def _ade20k(job: WorkflowJob, facts: Facts) -> JobBudget:
    evaluation, section = job.params["evaluation"], job.params["section"]
    options = section["ade20k"]
    data = facts.sizes.task("ade20k", section)
    mae = facts.mae_settings(evaluation.backbone)
    size = options["image_size"]
    network = networks.upernet(mae, size, data.classes, options.get("channels", 768), options.get("aux_channels", 256))
    epochs, batch = options.get("epochs", 100), options.get("batch_size", 16)
    budget = JobBudget(
        job,
        "ade20k",
        f"UPerNet {mae.size} p{mae.patch_size} {size}px",
        epochs * math.ceil(data.train / min(batch, data.train)),
        min(batch, data.train),
        network.train,
        epochs * data.train * network.train,
        f"{epochs} epochs of {data.train} images (UPerNet and the auxiliary FCN head)",
    )
    return _with_evaluation(budget, data.test, network.forward)


def _dp_finetune(job: WorkflowJob, facts: Facts) -> JobBudget:
    evaluation, section = job.params["evaluation"], job.params["section"]
    options = section["dp_finetune"]
    data = facts.sizes.of(evaluation.dataset, section["datasets"][evaluation.dataset])
    mae = facts.mae_settings(evaluation.backbone, section["image_size"])
    choice = _feature_choice(options)
    shape = (mae, data.classes, choice.pooling, choice.last_blocks, choice.final_norm)
    network = networks.mae_classifier(*shape, private=True)
    nonprivate = networks.mae_classifier(*shape, private=False).train
    steps, batch = options.get("steps", 1_500), options.get("batch_size", 262_144)
    budget = JobBudget(
        job,
        "dp_finetune",
        _shape(mae),
        steps,
        batch,
        network.train,
        steps * batch * network.train,
        f"{steps} DP steps x expected batch {batch}, per-example clipping counted",
        time_factor=dp_time_factor("dp_finetune", nonprivate, network.train),
    )
    return _with_evaluation(budget, data.test, network.forward)


EVALUATIONS = {
    "linear_probe": _linear_probe,
    "few_shot": _few_shot,
    "coco": _coco,
    "ade20k": _ade20k,
    "dp_finetune": _dp_finetune,
}


def _evaluate(job: WorkflowJob, facts: Facts) -> JobBudget:
    return EVALUATIONS[job.params["evaluation"].task](job, facts)


# --- DP-RandP -----------------------------------------------------------------------------------
def _phase1(job: WorkflowJob, facts: Facts) -> JobBudget:
    from dpvip.plan.dprandp_phase1 import Phase1Settings

    run = job.params["run"]
    settings = Phase1Settings.from_config(job.params["section"], run.model, run.method)
    images = job.params["data"]["images"]
    steps = settings.epochs * (images // settings.batch_size)
    per_step = networks.phase1_step(settings)
    return JobBudget(
        job,
        "dprandp_phase1",
        f"{settings.model} {settings.image_size}px {settings.method}",
        steps,
        settings.batch_size,
        per_step // settings.batch_size,
        steps * per_step,
        f"{settings.epochs} epochs x {images // settings.batch_size} steps of {settings.batch_size} view pairs",
        units={"epoch": per_step * (images // settings.batch_size)},
    )


def _private(job: WorkflowJob, facts: Facts) -> JobBudget:
    settings, run = job.params["settings"], job.params["run"]
    data = facts.sizes.of(run.task, job.params["data"])
    shape = (settings.model, data.classes, settings.image_size, settings.augmult)
    head, whole = networks.wrn_private(*shape, head_only=True), networks.wrn_private(*shape, head_only=False)
    phase2 = settings.phase2_steps * settings.batch_size * head.train
    phase3 = (settings.steps - settings.phase2_steps) * settings.batch_size * whole.train
    nonprivate = (
        settings.phase2_steps * networks.wrn_private(*shape, head_only=True, private=False).train
        + (settings.steps - settings.phase2_steps) * networks.wrn_private(*shape, head_only=False, private=False).train
    ) * settings.batch_size
    budget = JobBudget(
        job,
        "dprandp_private",
        f"{settings.model} {settings.image_size}px K={settings.augmult}",
        settings.steps,
        settings.batch_size,
        whole.train,
        phase2 + phase3,
        f"{settings.phase2_steps} head-only + {settings.steps - settings.phase2_steps} full DP steps x expected "
        f"batch {settings.batch_size} x {settings.augmult} views, per-example clipping counted",
        parts={"phase2": phase2, "phase3": phase3},
        units={"phase2": phase2},
        time_factor=dp_time_factor("dprandp_private", nonprivate, phase2 + phase3),
    )
    return _with_evaluation(budget, data.test, whole.forward)  # the EMA model, once at the end


# --- DP transfer ----------------------------------------------------------------------------------
def _transfer_network(feature_set, facts: Facts) -> tuple[networks.Flops, str] | None:
    """The features' FLOPs per image and the network's shape; None for a checkpoint file."""
    plan = facts.names["TRANSFER_PLAN"]
    spec = plan.backbones[feature_set.backbone]
    source, run = spec["from"], spec.get("run")
    if source == "file":
        return None
    if source == "dprandp":
        phase1 = facts.names["RANDP_PHASE1"]
        name = facts.names["RANDP_PLAN"].main_init.name if run == "main" else run
        hidden = facts.names["RANDP"]["phase1"].get("projection", {}).get("hidden", 4096)
        model = phase1[name].model
        flops = networks.wrn_features(model, feature_set.image_size, feature_set.recipe, hidden)
        return flops, f"{model} {feature_set.image_size}px"
    backbone = f"syn_vip_{run}" if source == "syn_vip" else run
    mae = facts.mae_settings(backbone, feature_set.image_size)
    return networks.mae_features(mae, feature_set.recipe), _shape(mae)


def _transfer_features(job: WorkflowJob, facts: Facts) -> JobBudget:
    feature_set = job.params["feature_set"]
    data = facts.sizes.of(feature_set.dataset, job.params["dataset"])
    found = _transfer_network(feature_set, facts)
    if found is None:
        return _unmodelled(job, "transfer_features", "a backbone from a checkpoint file: its shape is read at run time")
    network, model = found
    images = data.train * feature_set.views + data.test
    return JobBudget(
        job,
        "transfer_features",
        f"{model} {feature_set.recipe}",
        None,
        None,
        None,
        images * network.forward,
        f"{feature_set.recipe} features of {data.train} x {feature_set.views} train views and {data.test} test images",
        units={"image": network.forward},
    )


def _head_run(run, facts: Facts, dataset_specs: dict, job_type: str) -> tuple[int, int, float, str, float]:
    """(FLOPs, steps, examples per step, model, FLOPs at the non-private rate) of one head or
    probe run of a study."""
    from dpvip.transfer.head import HeadSettings
    from dpvip.transfer.private_probe import PrivateProbeSettings

    features = run.features
    data = facts.sizes.of(features.dataset, dataset_specs.get(features.dataset))
    found = _transfer_network(features, facts)
    if found is None:
        raise DpvipInputError(f"backbone '{features.backbone}' is a checkpoint file: its width is not known")
    width = found[0].width
    if run.kind == "head":
        from dpvip.selection import held_out_count

        values = dict(run.settings)
        validation = values.pop("validation", None)  # held out of training: the head trains on the rest
        train = data.train - (held_out_count(data.train, validation["fraction"]) if validation else 0)
        settings = HeadSettings(**values)
        private, steps, per_step = settings.epsilon is not None, settings.steps, settings.batch_fraction * train
    else:
        settings = PrivateProbeSettings(**run.settings)
        private, steps, per_step = settings.private, settings.steps, data.train
    head = networks.linear_head(width, data.classes, private)
    evaluation = data.test * head.forward
    timed = steps * per_step * head.train
    if private:
        timed = (
            DP_STEP_TIME_RATIOS[job_type] * steps * per_step * networks.linear_head(width, data.classes, False).train
        )
    flops = round(steps * per_step * head.train + evaluation)
    return flops, steps, per_step, f"{width}->{data.classes}", timed + evaluation


def job_type_of(study: str) -> str:
    """A transfer study's job type: Mehta et al.'s heads or DP-RandP's private probe."""
    return "mehta_heads" if study.startswith("mehta_") else "dprandp_probe"


def _transfer_study(job: WorkflowJob, facts: Facts) -> JobBudget:
    study = job.wildcards["study"]
    job_type = job_type_of(study)
    specs = facts.names["TRANSFER_CONFIG"].get("datasets", {})
    runs = facts.names["TRANSFER_PLAN"].runs(study)  # the job takes their digest (runs_digest)
    try:
        counted = [_head_run(run, facts, specs, job_type) for run in runs]
    except DpvipInputError as err:
        return _unmodelled(job, job_type, str(err))
    shapes = sorted({model for _, _, _, model, _ in counted})
    flops = sum(flops for flops, *_ in counted)
    timed = sum(timed for *_, timed in counted)
    return JobBudget(
        job,
        job_type,
        "linear " + ", ".join(shapes),
        sum(steps for _, steps, _, _, _ in counted),
        max((per_step for _, _, per_step, _, _ in counted), default=None),
        None,
        flops,
        f"{len(runs)} head runs on cached features (steps x expected batch, per-example clipping when private)",
        units={"study_run": flops / len(runs)} if runs else {},
        time_factor=timed / flops if flops else 1.0,
    )


# --- the rest -------------------------------------------------------------------------------------
def _unmodelled(job: WorkflowJob, job_type: str, why: str) -> JobBudget:
    return JobBudget(job, job_type, "", how=why, unmodelled=why)


GPU_RULES = {
    "syn_vip": _syn_vip,
    "dp_mae": _dp_mae,
    "evaluate": _evaluate,
    "dprandp_phase1": _phase1,
    "dprandp_private": _private,
    "transfer_features": _transfer_features,
    "transfer_study": _transfer_study,
}


def estimate(job: WorkflowJob, facts: Facts) -> JobBudget:
    """The job's budget: counted for a GPU rule, zero GPU FLOPs for a CPU job, and for a GPU
    rule without a model here, a row that says so."""
    if job.rule in GPU_RULES:
        return GPU_RULES[job.rule](job, facts)
    if job.declares_gpu:
        return _unmodelled(job, job.rule, f"no FLOP model for rule {job.rule}")
    return JobBudget(job, CPU, "", how="CPU job (synthetic data, data, tables, figures, audits): no GPU FLOPs")
