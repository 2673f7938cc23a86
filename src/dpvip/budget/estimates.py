"""One job's compute: its type, its network's shape, its planned steps and its FLOPs.

Each GPU rule has a function that reads the job's params (what its script receives) and
the workflow's plan, and counts what the job's code runs: per example (or image, or step)
FLOPs from `dpvip.budget.networks`, times the examples the plan gives it (epochs x examples,
DP steps x expected batch, iterations x batch, grid points...), plus its evaluation passes.
"""

from __future__ import annotations

import math

from dpvip.budget import networks
from dpvip.budget.job_budget import CPU, Facts, JobBudget, dp_time_factor, shape_of, unmodelled, with_evaluation
from dpvip.budget.transfer_estimates import transfer_features, transfer_study
from dpvip.budget.workflow import WorkflowJob


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
        shape_of(settings.model) + f" mask {settings.model.mask_ratio}",
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
        shape_of(settings.model) + f" mask {settings.model.mask_ratio}" + (f" dec{depth}" if depth else ""),
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
        shape_of(mae),
        options["epochs"] * math.ceil(data.train / options["batch_size"]) * grid,
        options["batch_size"],
        head.train,
        encoded * encoder.forward + seen * head.train,
        f"{grid} blrs x {options['epochs']} epochs of {data.train} images"
        + (", each through the frozen encoder" if options.get("augment", True) else ", features once"),
    )
    return with_evaluation(budget, data.test, encoder.forward)


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
        model, grid = shape_of(mae), len(options["lrs"])
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
    return with_evaluation(budget, grid * data.test, network.forward)


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
    return with_evaluation(budget, data.test, network.forward)


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
    return with_evaluation(budget, data.test, network.forward)


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
        shape_of(mae),
        steps,
        batch,
        network.train,
        steps * batch * network.train,
        f"{steps} DP steps x expected batch {batch}, per-example clipping counted",
        time_factor=dp_time_factor("dp_finetune", nonprivate, network.train),
    )
    return with_evaluation(budget, data.test, network.forward)


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
    return with_evaluation(budget, data.test, whole.forward)  # the EMA model, once at the end


GPU_RULES = {
    "syn_vip": _syn_vip,
    "dp_mae": _dp_mae,
    "evaluate": _evaluate,
    "dprandp_phase1": _phase1,
    "dprandp_private": _private,
    "transfer_features": transfer_features,
    "transfer_study": transfer_study,
}


def estimate(job: WorkflowJob, facts: Facts) -> JobBudget:
    """The job's budget: counted for a GPU rule, zero GPU FLOPs for a CPU job, and for a GPU
    rule without a model here, a row that says so."""
    if job.rule in GPU_RULES:
        return GPU_RULES[job.rule](job, facts)
    if job.declares_gpu:
        return unmodelled(job, job.rule, f"no FLOP model for rule {job.rule}")
    return JobBudget(job, CPU, "", how="CPU job (synthetic data, data, tables, figures, audits): no GPU FLOPs")
