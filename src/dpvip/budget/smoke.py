"""Host memory from the paper-shape smoke run (config/smoke.yaml over the paper config).

The smoke run has the paper's models, resolutions and job graph, cut to about one job per
rule and model size; every job writes a Snakemake benchmark TSV and ends its log with its
exact peak RSS (/proc's VmHWM; the benchmark's sampled `max_rss` where a log has none). A paper
job takes the record of the smoke job of the same kind and shape (`memory_key`): the same
rule, task and network. No record: "no smoke run".
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from dpvip.budget.workflow import PlannedWorkflow, WorkflowJob
from dpvip.report.jobs.smoke import benchmark_peak_mb

NO_SMOKE_RUN = "no smoke run"


def memory_key(job: WorkflowJob, names: dict) -> tuple:
    """What sets a job's host memory: its rule and network (and task, recipe, resolution)."""
    params = job.params
    if job.rule == "syn_vip":
        return (job.rule, params["size"])
    if job.rule == "dp_mae":
        return (job.rule, params["model"])
    if job.rule == "evaluate":
        evaluation = params["evaluation"]
        shapes = names["mae_shapes"]()
        model = shapes[evaluation.backbone][0] if evaluation.backbone in shapes else evaluation.backbone
        return (job.rule, evaluation.task, model)
    if job.rule == "dprandp_phase1":
        return (job.rule, params["run"].model, params["run"].method)
    if job.rule == "dprandp_private":
        return (job.rule, params["settings"].model)
    if job.rule == "transfer_features":
        feature_set = params["feature_set"]
        return (job.rule, feature_set.backbone, feature_set.recipe, feature_set.image_size)
    if job.rule == "transfer_study":
        return (job.rule, job.wildcards["study"])
    return (job.rule,)


def smoke_memory(smoke: PlannedWorkflow, directory: str | Path) -> dict[tuple, float]:
    """{memory key: the largest peak RSS (MB) among the smoke run's jobs of that key} from the
    benchmark files under `directory` (the smoke run's working directory)."""
    found: dict[tuple, float] = {}
    for job in smoke.jobs:
        if not job.benchmark:
            continue
        rss = benchmark_peak_mb(Path(directory) / job.benchmark, job.log and Path(directory) / job.log)
        if rss is not None:
            key = memory_key(job, smoke.names)
            found[key] = max(rss, found.get(key, 0.0))
    return found


def memory_column(jobs: Iterable[WorkflowJob], names: dict, records: dict[tuple, float]) -> list[float | str]:
    """Each job's smoke-run peak RSS (MB), or NO_SMOKE_RUN."""
    return [records.get(memory_key(job, names), NO_SMOKE_RUN) for job in jobs]
