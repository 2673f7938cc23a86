"""The compute budget as tables: one row per GPU job (CPU jobs one row per rule), the totals
per job type, and the papers' own run times beside ours; plus the runtime check.

GPU-hours = FLOPs / (peak x utilisation) / 3600 on one GPU of each kind; a job's wall time is
that over the GPUs it asks for (perfect scaling, which a multi-node job only approaches).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from dpvip.budget import DP_STEP_TIME_RATIOS, PAPER_PEAK_TFLOPS, PEAK_TFLOPS, UTILISATION
from dpvip.budget.job_budget import CPU, JOB_TYPES, JobBudget
from dpvip.budget.smoke import NO_SMOKE_RUN
from dpvip.errors import DpvipInputError

# What resumes after a time limit (its state saved every k steps and on SIGTERM, a rerun
# continues), by job type; the evaluations and transfer jobs since issue 24 item 2.
RESUMES = {
    "syn_vip": "its training state (work/state.pt)",
    "dp_mae": "its training state and privacy ledger",
    "dprandp_phase1": "its training state",
    "dprandp_private": "its training state and privacy ledger",
    "transfer_features": "its finished cache shards",
    "mehta_heads": "its finished runs",
    "dprandp_probe": "its finished runs",
    "linear_probe": "its loop state (dpvip.train.resume.LoopState)",
    "few_shot": "its loop state (dpvip.train.resume.LoopState)",
    "coco": "its loop state (dpvip.train.resume.LoopState)",
    "ade20k": "its loop state (dpvip.train.resume.LoopState)",
    "dp_finetune": "its loop state (dpvip.train.resume.LoopState)",
}
FITS, RESUMES_LABEL, TOO_SHORT = "fits", "resumes", "TOO SHORT"
NO_RUNTIME, NOT_MODELLED = "no runtime set", "not modelled"


def gpu_hours(flops: float, gpu: str) -> float:
    return flops / (PEAK_TFLOPS[gpu] * 1e12 * UTILISATION) / 3600


def gpus_of(budget: JobBudget) -> int:
    """The GPUs a job asks for: per node times nodes (at least one, for a CPU-size config)."""
    resources = budget.job.resources
    return max(1, int(resources.get("gpu", 0) or 0) * int(resources.get("nodes", 1) or 1))


@dataclass(frozen=True)
class RuntimeCheck:
    status: str  # FITS, RESUMES_LABEL, TOO_SHORT, NO_RUNTIME, NOT_MODELLED
    wall_hours: float | None  # on A100s, over the job's GPUs
    runtime_hours: float | None
    limits: int | None  # how many runtime limits the job runs into (attempts) when it resumes

    @property
    def problem(self) -> bool:
        return self.status == TOO_SHORT

    def label(self, retries: int | None) -> str:
        if self.status != RESUMES_LABEL:
            return self.status
        note = f"{RESUMES_LABEL}: {self.limits} runtime limits"
        if retries is not None and self.limits > retries + 1:
            note += f" (more than retries {retries} + 1)"
        return note


def runtime_check(budget: JobBudget) -> RuntimeCheck:
    """Does the Slurm runtime the job gets cover its A100 wall time at the stated utilisation,
    or does the job resume after a time limit?"""
    if budget.unmodelled:
        return RuntimeCheck(NOT_MODELLED, None, None, None)
    wall = gpu_hours(budget.timed_flops, "A100") / gpus_of(budget)
    runtime = budget.job.resources.get("runtime")
    if runtime is None or isinstance(runtime, str):
        return RuntimeCheck(NO_RUNTIME, wall, None, None)
    hours = float(runtime) / 60
    if wall <= hours:
        return RuntimeCheck(FITS, wall, hours, 1)
    if budget.job_type in RESUMES:
        return RuntimeCheck(RESUMES_LABEL, wall, hours, math.ceil(wall / hours))
    return RuntimeCheck(TOO_SHORT, wall, hours, None)


def gpu_budgets(budgets: list[JobBudget]) -> list[JobBudget]:
    return [b for b in budgets if b.job_type != CPU]


def runtime_problems(budgets: list[JobBudget]) -> list[tuple[JobBudget, RuntimeCheck]]:
    """GPU jobs whose runtime is too short for their budget and that do not resume."""
    checks = [(b, runtime_check(b)) for b in gpu_budgets(budgets)]
    return [(b, check) for b, check in checks if check.problem]


# --- tables -----------------------------------------------------------------------------------
def notes(scale: str | None) -> list[str]:
    peaks = ", ".join(f"{gpu} {tflops:g}" for gpu, tflops in PEAK_TFLOPS.items())
    return [
        f"Configuration scale: {scale or 'as given'}.",
        f"GPU-hours at {UTILISATION:.0%} of peak dense bf16 throughput ({peaks} TFLOP/s); a job's wall time is "
        "its A100 GPU-hours over the GPUs it asks for (gpu x nodes).",
        "DP jobs: their GPU-hours are their non-private training FLOPs times the DP step's measured time ratio "
        "to the non-private step ("
        + ", ".join(f"{JOB_TYPES[t]} {r:g}x" for t, r in DP_STEP_TIME_RATIOS.items())
        + "; one H200, bf16, at the paper config's micro-batches), plus their evaluation.",
        "FLOPs: torch.utils.flop_counter on the jobs' own networks at their configured shapes (matrix products, "
        "convolutions and attention, 2 per multiply-add; element-wise work, optimizers and noise not counted), "
        "times the planned examples; DP steps include the per-example norms and clipped sums of "
        "dpvip.privacy.clipping; ViTDet's RoIAlign and NMS are not counted.",
        "Synthetic data, data preparation, tables, figures and audits are CPU jobs: 0 GPU FLOPs (one row per rule).",
        "Runtime check: 'fits' if the Slurm runtime covers the A100 wall time; 'resumes: N runtime limits' if it "
        "does not but the job resumes from its saved state (N attempts); 'TOO SHORT' otherwise.",
        f"Peak RSS: the paper-shape smoke run's benchmark of a job of the same rule and network ('{NO_SMOKE_RUN}' "
        "when there is none).",
    ]


def job_frame(budgets: list[JobBudget], memory: list, retries: int | None) -> pd.DataFrame:
    """One row per GPU job, by job type, one per CPU rule (its job count in the job column)."""
    rows, cpu_rules = [], defaultdict(list)
    order = list(JOB_TYPES)

    def by_type(pair):
        budget = pair[0]
        return (order.index(budget.job_type) if budget.job_type in order else len(order), budget.job.name)

    for budget, rss in sorted(zip(budgets, memory), key=by_type):
        if budget.job_type == CPU:
            cpu_rules[budget.job.rule].append(rss)
            continue
        check = runtime_check(budget)
        rows.append(
            {
                "job type": JOB_TYPES.get(budget.job_type, budget.job_type),
                "job": budget.job.name,
                "network": budget.model,
                "GPUs": gpus_of(budget),
                "steps": budget.steps,
                "examples per step": budget.examples_per_step,
                "GFLOP per example (training pass)": None
                if budget.train_flops_per_example is None
                else budget.train_flops_per_example / 1e9,
                "PFLOP": None if budget.unmodelled else budget.flops / 1e15,
                "A100 GPU-hours": None if budget.unmodelled else gpu_hours(budget.timed_flops, "A100"),
                "H100 GPU-hours": None if budget.unmodelled else gpu_hours(budget.timed_flops, "H100"),
                "A100 wall hours": check.wall_hours,
                "Slurm runtime (h)": check.runtime_hours,
                "runtime check": check.label(retries),
                "peak RSS (MB, smoke run)": rss,
                "how counted": budget.how,
            }
        )
    for rule, values in sorted(cpu_rules.items()):
        measured = [v for v in values if v != NO_SMOKE_RUN]
        rows.append(
            {
                "job type": JOB_TYPES[CPU],
                "job": f"{rule} ({len(values)} jobs)",
                "PFLOP": 0.0,
                "A100 GPU-hours": 0.0,
                "H100 GPU-hours": 0.0,
                "runtime check": "CPU job",
                "peak RSS (MB, smoke run)": max(measured) if measured else NO_SMOKE_RUN,
                "how counted": "CPU job: no GPU FLOPs",
            }
        )
    return pd.DataFrame(rows)


def summary_frame(budgets: list[JobBudget]) -> pd.DataFrame:
    """Per job type: jobs, PFLOP, GPU-hours on each GPU, the longest wall time; then the total."""
    groups: dict[str, list[JobBudget]] = defaultdict(list)
    for budget in budgets:
        groups[budget.job_type].append(budget)
    rows = []
    for job_type in [t for t in JOB_TYPES if t in groups] + [t for t in groups if t not in JOB_TYPES]:
        members = groups[job_type]
        flops = sum(b.flops for b in members)
        timed = sum(b.timed_flops for b in members)
        unmodelled = sum(1 for b in members if b.unmodelled)
        walls = [runtime_check(b).wall_hours for b in members if job_type != CPU]
        rows.append(
            {
                "job type": JOB_TYPES.get(job_type, job_type),
                "jobs": len(members),
                "not modelled": unmodelled,
                "PFLOP": flops / 1e15,
                "A100 GPU-hours": gpu_hours(timed, "A100"),
                "H100 GPU-hours": gpu_hours(timed, "H100"),
                "longest job, A100 wall hours": max((w for w in walls if w is not None), default=None),
            }
        )
    flops, timed = sum(b.flops for b in budgets), sum(b.timed_flops for b in budgets)
    rows.append(
        {
            "job type": "total",
            "jobs": len(budgets),
            "not modelled": sum(1 for b in budgets if b.unmodelled),
            "PFLOP": flops / 1e15,
            "A100 GPU-hours": gpu_hours(timed, "A100"),
            "H100 GPU-hours": gpu_hours(timed, "H100"),
        }
    )
    return pd.DataFrame(rows)


# --- the papers' statements ----------------------------------------------------------------------
def load_statements(path: str | Path) -> dict:
    """The data file: {"statements": [...], "datasets": {...}}, checked."""
    path = Path(path)
    if not path.is_file():
        raise DpvipInputError(f"compute budget data file {path} does not exist")
    data = yaml.safe_load(path.read_text()) or {}
    for entry in data.get("statements", []):
        missing = [key for key in ("id", "paper", "source", "job_type", "job", "per", "hardware") if key not in entry]
        if missing:
            raise DpvipInputError(f"{path}: statement {entry.get('id', '?')} has no '{missing[0]}'")
        times = [key for key in ("seconds", "device_hours", "images_per_second_per_device") if key in entry]
        if len(times) != 1:
            raise DpvipInputError(
                f"{path}: statement {entry['id']} needs one of seconds, device_hours, images_per_second_per_device"
            )
    return data


def paper_device_seconds(statement: dict) -> float:
    """The statement's device-seconds for its unit of work."""
    if "device_hours" in statement:
        return statement["device_hours"] * 3600
    if "images_per_second_per_device" in statement:
        return 1 / statement["images_per_second_per_device"]
    return statement["seconds"] * statement["devices"]


def statements_frame(budgets: list[JobBudget], statements: list[dict]) -> pd.DataFrame:
    """Each statement beside the same unit of work of ours: our FLOPs and A100/H100 time at the
    stated utilisation, and the utilisation the paper's time implies for our FLOPs."""
    rows = []
    for statement in statements:
        match = next(
            (b for b in budgets if b.job_type == statement["job_type"] and statement["job"] in b.job.name), None
        )
        flops = None if match is None else match.flops_of(statement["per"])
        timed = None if match is None else match.timed_of(statement["per"])
        if flops is not None:
            flops *= statement.get("scale", 1.0)
            timed *= statement.get("scale", 1.0)
        device_seconds = paper_device_seconds(statement)
        peak = PAPER_PEAK_TFLOPS.get(statement["hardware"])
        rows.append(
            {
                "paper": statement["paper"],
                "source": statement["source"],
                "statement": statement["quote"],
                "unit": statement["per"],
                "paper device-hours": device_seconds / 3600,
                "hardware": statement["hardware"],
                "our job": match.job.name if match else "no such job in this DAG",
                "our PFLOP": None if flops is None else flops / 1e15,
                "our A100 GPU-hours": None if flops is None else gpu_hours(timed, "A100"),
                "our H100 GPU-hours": None if flops is None else gpu_hours(timed, "H100"),
                "utilisation the paper's time implies": (
                    flops / (device_seconds * peak * 1e12) if flops is not None and peak else None
                ),
            }
        )
    return pd.DataFrame(rows)


def statement_notes() -> list[str]:
    peaks = ", ".join(f"{hw} {tflops:g}" for hw, tflops in PAPER_PEAK_TFLOPS.items())
    return [
        "Each paper's statement (config/paper_values/compute_budget.yaml) beside the same unit of work of the job "
        "of ours that does it.",
        f"Implied utilisation: our counted FLOPs over the paper's device-seconds x peak ({peaks} TFLOP/s); "
        "none where the device is not given per chip (TPU v4 hours).",
        f"Ours at {UTILISATION:.0%} utilisation, as the job table.",
    ]
