"""The compute of the DP transfer jobs: feature extraction by a frozen backbone, and the
head and probe runs of a study on the cached features (Mehta et al.'s heads, DP-RandP's
private probe)."""

from __future__ import annotations

from dpvip.budget import DP_STEP_TIME_RATIOS, networks
from dpvip.budget.job_budget import Facts, JobBudget, shape_of, unmodelled
from dpvip.budget.workflow import WorkflowJob
from dpvip.errors import DpvipInputError


def transfer_network(feature_set, facts: Facts) -> tuple[networks.Flops, str] | None:
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
    return networks.mae_features(mae, feature_set.recipe), shape_of(mae)


def transfer_features(job: WorkflowJob, facts: Facts) -> JobBudget:
    feature_set = job.params["feature_set"]
    data = facts.sizes.of(feature_set.dataset, job.params["dataset"])
    found = transfer_network(feature_set, facts)
    if found is None:
        return unmodelled(job, "transfer_features", "a backbone from a checkpoint file: its shape is read at run time")
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


def head_run(run, facts: Facts, dataset_specs: dict, job_type: str) -> tuple[int, int, float, str, float]:
    """(FLOPs, steps, examples per step, model, FLOPs at the non-private rate) of one head or
    probe run of a study."""
    from dpvip.transfer.head import HeadSettings
    from dpvip.transfer.private_probe import PrivateProbeSettings

    features = run.features
    data = facts.sizes.of(features.dataset, dataset_specs.get(features.dataset))
    found = transfer_network(features, facts)
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


def transfer_study(job: WorkflowJob, facts: Facts) -> JobBudget:
    study = job.wildcards["study"]
    job_type = job_type_of(study)
    specs = facts.names["TRANSFER_CONFIG"].get("datasets", {})
    runs = facts.names["TRANSFER_PLAN"].runs(study)  # the job takes their digest (runs_digest)
    try:
        counted = [head_run(run, facts, specs, job_type) for run in runs]
    except DpvipInputError as err:
        return unmodelled(job, job_type, str(err))
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
