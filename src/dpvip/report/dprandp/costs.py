"""DP-RandP Tables 8 and 9, the computational cost: the paper's times beside our measured ones.

Table 8 is the one-time cost per dataset (Phase I, and the feature extraction of private
linear probing), Table 9 the cost of one private run (a linear probe; Phase II and Phase III
of DP-RandP). One row per procedure, in the paper's order (the paper prints them as columns
of one row), then our extra rows. Our times are wall seconds, measured as:

- Phase I: its training loop, from `metrics.jsonl`: a record closes a window of steps that
  took steps x batch / images_per_second seconds (the job's start-up is left out);
- feature extraction: the Snakemake benchmark of the feature-cache job (job wall time,
  start-up included): the cache records no time of its own;
- a linear probe: the mean `seconds` of the probe study's runs (one epsilon and seed each);
- Phase II and Phase III: the seconds per step of the runs that spend every step in that
  phase (Phase II only; w/o Phase II), times the steps our schedule gives the phase at its
  smallest epsilon; the whole DP-RandP run is measured directly beside them.

A private run whose `seconds` is 0 resumed from a finished state (it timed nothing) and is
left out; a run resumed mid-way times only its last part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dpvip.plan.dprandp_phase1 import Phase1Settings
from dpvip.plan.dprandp_rows import PHASE2_ONLY, WARM_FULL, WARM_NO_PHASE2, cost_runs
from dpvip.plan.dprandp_runs import MAIN_TASK, DPRandPPlan, PrivateRun, epsilon_label
from dpvip.report.common.paper_values import paper_table

TITLES = {
    "table8": "DP-RandP Table 8: one-time computational cost per dataset (Phase I, feature extraction), CIFAR-10",
    "table9": "DP-RandP Table 9: computational cost of one private run (linear probe, Phase II, Phase III), CIFAR-10",
}
UNIT_SECONDS = {"hours": 3600.0, "minutes": 60.0, "seconds": 1.0}
UNIT_SHORT = {"hours": "h", "minutes": "min", "seconds": "s"}
PAPER_HARDWARE = (
    "the paper's GPUs: the text gives 1 A100 for a private run (about 5.5 h for 875 steps) and for the ImageNet "
    "probe; the hardware of Phase I and of the CIFAR-10 probe is not stated"
)
PAPER_SCHEDULE_EPSILON = 1.0  # Table 9 is for Table 13's hyper-parameters; the text's 875 steps are epsilon 1's


@dataclass
class CostInputs:
    """What the cost tables read, each optional (a configuration may run no probe)."""

    phase1: dict[str, list[dict]] = field(default_factory=dict)  # Phase I run name -> its metrics.jsonl records
    feature_seconds: dict[str, float] = field(default_factory=dict)  # feature cache -> its job's wall seconds
    results: dict[str, dict] = field(default_factory=dict)  # PrivateRun.path -> result
    probe: dict | None = None  # the CIFAR-10 private linear probing study (dprandp_probe_cifar)


# --- measurements -------------------------------------------------------------------------------
def phase1_seconds(records: list[dict], batch_size: int) -> float:
    """Seconds of a Phase I training loop from its metrics records (each closes a window)."""
    seconds, previous = 0.0, 0
    for record in records:
        if record.get("images_per_second"):
            seconds += (record["step"] - previous) * batch_size / record["images_per_second"]
        previous = record["step"]
    return seconds


def _timed(runs: list[PrivateRun], results: dict[str, dict]) -> list[dict]:
    return [results[r.path] for r in runs if r.path in results and results[r.path].get("seconds", 0) > 0]


def _untimed(runs: list[PrivateRun], results: dict[str, dict]) -> int:
    return sum(1 for r in runs if r.path in results and not results[r.path].get("seconds", 0) > 0)


def seconds_per_step(runs: list[PrivateRun], results: dict[str, dict]) -> tuple[float, int]:
    """(mean seconds per step, number of timed runs) of `runs`."""
    timed = _timed(runs, results)
    if not timed:
        return math.nan, 0
    return float(np.mean([r["seconds"] / r["steps"] for r in timed])), len(timed)


# --- the paper's side --------------------------------------------------------------------------
def _paper_times(values: pd.DataFrame, table: str) -> dict[str, tuple[str, float]]:
    """{procedure: (as printed, seconds)} of the paper's Table 8 or 9, in its order."""
    rows = values[(values["paper"] == "dprandp") & (values["table"] == table)]
    return {
        row.column: (f"{row.value:g} {UNIT_SHORT[row.unit]}", row.value * UNIT_SECONDS[row.unit])
        for row in rows.itertuples()
    }


def _paper_work(values: pd.DataFrame) -> dict[str, tuple[str, float]]:
    """{procedure: (the work the paper's time is for, its steps)} (steps NaN where not given)."""
    schedule = paper_table(values, "dprandp", "table13")
    column = f"epsilon={epsilon_label(PAPER_SCHEDULE_EPSILON)}"
    total, phase2 = int(schedule.at["Total Steps", column]), int(schedule.at["Steps in Phase II", column])
    where = f"Tab. 13, ε = {epsilon_label(PAPER_SCHEDULE_EPSILON)}"
    return {
        "Phase I": ("WRN-16-4 on StyleGAN-Oriented images", math.nan),
        "feature extraction in LP": ("CIFAR-10 through the Phase I network", math.nan),
        "linear probing in LP": ("one run: 100 full-batch steps (Tab. 4, 10)", 100.0),
        "Phase II": (f"{phase2} steps of batch 4096, augmult 16 ({where})", float(phase2)),
        "Phase III": (
            f"{total - phase2} steps of batch 4096, augmult 16 ({where}; the text: 5.5 h for a run of {total} steps)",
            float(total - phase2),
        ),
    }


# --- our side ----------------------------------------------------------------------------------
@dataclass
class Measured:
    seconds: float
    steps: float  # NaN where a step means nothing (feature extraction)
    work: str
    how: str


def _phase1_rows(plan: DPRandPPlan, inputs: CostInputs) -> dict[str, Measured]:
    """{procedure: Measured} of every Phase I run with metrics: the main one is 'Phase I'."""
    rows = {}
    for run in plan.phase1_runs():
        records = inputs.phase1.get(run.name)
        if not records:
            continue
        settings = Phase1Settings.from_config(plan.section["phase1"], run.model, run.method)
        steps, epochs = records[-1]["step"], records[-1].get("epoch", math.nan)
        label = "Phase I" if run == plan.main_init else f"Phase I: {run.name}"
        rows[label] = Measured(
            phase1_seconds(records, settings.batch_size),
            float(steps),
            f"{run.model} ({run.method}) on {run.dataset} at {settings.image_size} px: {steps} steps of "
            f"{settings.batch_size} view pairs ({epochs:g} epochs)",
            "training loop, from metrics.jsonl",
        )
    return rows


def _feature_row(inputs: CostInputs) -> dict[str, Measured]:
    if not inputs.feature_seconds:
        return {}
    caches = (inputs.probe or {}).get("features", {})
    sizes = [
        f"{caches[name]['train']} train + {caches[name]['test']} test"
        for name in inputs.feature_seconds
        if name in caches
    ]
    return {
        "feature extraction in LP": Measured(
            sum(inputs.feature_seconds.values()),
            math.nan,
            f"{', '.join(inputs.feature_seconds)}" + (f" ({'; '.join(sizes)} images)" if sizes else ""),
            "feature-cache job wall time (Snakemake benchmark, start-up included)",
        )
    }


def _probe_row(inputs: CostInputs) -> dict[str, Measured]:
    runs = [run for run in (inputs.probe or {}).get("runs", []) if run["result"].get("seconds")]
    if not runs:
        return {}
    steps = "/".join(str(s) for s in sorted({run["result"]["steps"] for run in runs}))
    features = ", ".join(sorted({run["features"] for run in runs}))
    return {
        "linear probing in LP": Measured(
            float(np.mean([run["result"]["seconds"] for run in runs])),
            float(np.mean([run["result"]["steps"] for run in runs])),
            f"one run: {steps} full-batch steps on {features}",
            f"mean of the probe study's {len(runs)} runs' seconds",
        )
    }


def _phase_rows(plan: DPRandPPlan, inputs: CostInputs) -> dict[str, Measured]:
    """Phase II and Phase III of one run of our schedule at its smallest ε, from the seconds
    per step of the runs that spend every step in that phase; the whole run beside them."""
    series = cost_runs(plan, "table9")
    epsilon = min(plan.epsilons(MAIN_TASK))
    entry = plan.entry(MAIN_TASK, epsilon)
    where = f"our schedule at ε = {epsilon_label(epsilon)}"
    timed = _timed([r for cells in series.values() for runs in cells.values() for r in runs], inputs.results)
    if timed:
        where = f"batch {_shape(timed, 'batch_size')}, augmult {_shape(timed, 'augmult')}; {where}"
    rows = {}
    for label, source, steps in (
        ("Phase II", PHASE2_ONLY, entry.phase2_steps),
        ("Phase III", WARM_NO_PHASE2, entry.steps - entry.phase2_steps),
    ):
        per_step, timed = seconds_per_step([r for runs in series[source].values() for r in runs], inputs.results)
        if timed and steps:  # a schedule without Phase II has no Phase II to time
            rows[label] = Measured(
                per_step * steps,
                float(steps),
                f"{steps} steps ({where})",
                f"{steps} × the seconds per step of {timed} '{source}' runs (every step in this phase)",
            )
    whole, timed = seconds_per_step(series[WARM_FULL].get(epsilon, []), inputs.results)
    if timed:
        rows["DP-RandP run (Phases II and III)"] = Measured(
            whole * entry.steps,
            float(entry.steps),
            f"{entry.steps} steps, {entry.phase2_steps} of them in Phase II ({where})",
            f"measured: mean seconds of {timed} DP-RandP runs",
        )
    return rows


def _shape(results: list[dict], key: str) -> str:
    return "/".join(str(v) for v in sorted({r[key] for r in results}))


def _record(procedure: str, paper: tuple[str, float] | None, work: tuple[str, float] | None, ours: Measured | None):
    printed, paper_seconds = paper or ("", math.nan)
    paper_work, paper_steps = work or ("", math.nan)
    seconds, steps = (ours.seconds, ours.steps) if ours else (math.nan, math.nan)
    return {
        "procedure": procedure,
        "paper": printed,
        "paper (s)": paper_seconds,
        "paper's work": paper_work,
        "paper per step (s)": paper_seconds / paper_steps,
        "ours (s)": seconds,
        "ours per step (s)": seconds / steps,
        "our work": ours.work if ours else "",
        "ours measured as": ours.how if ours else "",
    }


def cost_table(
    table: str,
    plan: DPRandPPlan,
    inputs: CostInputs,
    values: pd.DataFrame,
    scale: str = "embedded",
    cores: int | None = None,
) -> tuple[pd.DataFrame, str, list[str]]:
    """(frame, title, notes) of Table 8 or 9 ('table8' or 'dprandp_table8'); `cores`: the CPU
    cores of the machine the jobs ran on, when known (a local run)."""
    name = table.removeprefix("dprandp_")
    if name == "table8":
        ours = _phase1_rows(plan, inputs) | _feature_row(inputs)
    elif name == "table9":
        ours = _probe_row(inputs) | _phase_rows(plan, inputs)
    else:
        raise KeyError(table)
    paper, work = _paper_times(values, name), _paper_work(values)
    procedures = [*paper, *(p for p in ours if p not in paper)]
    frame = pd.DataFrame([_record(p, paper.get(p), work.get(p), ours.get(p)) for p in procedures])
    return frame, TITLES[name], cost_notes(name, plan, inputs, scale, cores, frame)


def hardware(plan: DPRandPPlan, cores: int | None) -> str:
    gpus, threads = int(plan.section.get("gpus", 0)), int(plan.section.get("threads", 1))
    if gpus:
        return f"{gpus} GPU(s) per job (dprandp.gpus)"
    machine = f" on a {cores}-core machine, whose cores jobs running in parallel share" if cores else ""
    return f"CPU, {threads} thread{'s' if threads != 1 else ''} per job (dprandp.threads){machine}"


def cost_notes(
    name: str, plan: DPRandPPlan, inputs: CostInputs, scale: str, cores: int | None, frame: pd.DataFrame
) -> list[str]:
    notes = [
        f"Scale: {scale}. Times in wall seconds. Paper: as printed, on {PAPER_HARDWARE}. "
        f"Ours: {hardware(plan, cores)}, at {scale} scale: far less work than the paper's (see 'our work'), "
        "so compare the per-step times, not the totals.",
        "'paper per step' divides the paper's time by the steps its text gives for it; empty where it gives none.",
    ]
    missing = [p for p, s in zip(frame["procedure"], frame["ours (s)"]) if math.isnan(s)]
    if missing:
        notes.append(f"Not measured here: {', '.join(missing)} (no run of this configuration times it).")
    if name == "table9":
        runs = [r for runs in cost_runs(plan, name).values() for cell in runs.values() for r in cell]
        untimed = _untimed(list(dict.fromkeys(runs)), inputs.results)
        if untimed:
            notes.append(f"{untimed} run(s) with 0 seconds (resumed from a finished state) are left out.")
    return notes
