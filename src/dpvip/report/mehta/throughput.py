"""Mehta et al.'s Table 10: the throughput (images per second per core) of DP-LAMB per model,
full fine-tuning against the last layer on 64 TPUv4 cores, beside the throughput our DP-LAMB
runs of Table 2 measured (a linear head on cached features, on CPU threads). Absolute numbers
do not compare; the ratio of each model's last-layer throughput to the first model's does,
as far as our stand-ins' heads stand for the paper's models. Torch-free."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import pandas as pd

from dpvip.plan.transfer import MEHTA_THROUGHPUT_STUDY
from dpvip.plan.transfer_runs import model_key
from dpvip.report.common.paper_values import paper_table
from dpvip.report.common.transfer_cells import feature_parts

TITLE = "Mehta et al. Table 10: DP-LAMB throughput per core, per model (paper: TPUv4 cores; ours: CPU threads)"
FULL, LAST, SPEED_UP = "Tuning type / Full", "Tuning type / Last layer", "Speed Up"
NAN = math.nan


@dataclass(frozen=True)
class Throughput:
    """Our DP-LAMB runs of one model: examples processed over the core-seconds they took."""

    backbone: str
    runs: int
    examples: float  # the expected batches q n over every step: public, unlike the realised Poisson batches
    core_seconds: float  # seconds x threads (CPU) or seconds (one GPU)
    devices: tuple[str, ...]
    estimated: bool  # some run recorded neither its steps' seconds nor its threads (older results)

    @property
    def per_core(self) -> float:
        return self.examples / self.core_seconds


def _core_seconds(result: dict, threads: int) -> tuple[float, bool]:
    """(seconds x cores of the run's steps, whether they had to be estimated): runs recorded before
    `train_seconds` and `threads` existed give their whole time (steps, calibration, evaluation)
    and the configured threads."""
    seconds = result.get("train_seconds", result["seconds"])
    cores = 1 if result.get("device", "cpu") != "cpu" else result.get("threads", threads)
    return seconds * cores, "train_seconds" not in result or "threads" not in result


def measured(results: dict, threads: int) -> dict[str, Throughput]:
    """{model key: its throughput} of the private DP-LAMB runs of a Table 2 study; `threads` is
    the study job's configured threads (for runs that did not record theirs)."""
    train = {path: cache["train"] for path, cache in results["features"].items()}
    groups = defaultdict(list)
    for run in results["runs"]:
        if run["settings"]["optimizer"] == "lamb" and run["settings"].get("epsilon") is not None:
            groups[model_key(run["row"].partition(" / ")[0])].append(run)
    throughputs = {}
    for key, runs in groups.items():
        timed = [_core_seconds(run["result"], threads) for run in runs]
        throughputs[key] = Throughput(
            feature_parts(runs[0]["features"])["backbone"],
            len(runs),
            sum(run["result"]["steps"] * run["settings"]["batch_fraction"] * train[run["features"]] for run in runs),
            sum(seconds for seconds, _ in timed),
            tuple(sorted({run["result"].get("device", "cpu") for run in runs})),
            any(estimated for _, estimated in timed),
        )
    return throughputs


def _rows(paper: pd.DataFrame, ours: dict[str, Throughput]) -> pd.DataFrame:
    keys = {model: model_key(model) for model in paper.index}
    reference = next((model for model in paper.index if keys[model] in ours), paper.index[0])
    base_ours = ours[keys[reference]].per_core if keys[reference] in ours else NAN
    rows = []
    for model in paper.index:
        mine = ours.get(keys[model])
        rows.append(
            {
                "Model": model,
                "Full (paper)": paper.loc[model, FULL],
                "Last layer (paper)": paper.loc[model, LAST],
                "Speed Up (paper)": paper.loc[model, SPEED_UP],
                f"Last layer vs {reference} (paper)": paper.loc[model, LAST] / paper.loc[reference, LAST],
                "stand-in": mine.backbone if mine else "",
                "DP-LAMB runs (ours)": mine.runs if mine else NAN,
                "examples (ours)": mine.examples if mine else NAN,
                "core-seconds (ours)": mine.core_seconds if mine else NAN,
                "Last layer img/second/core (ours)": mine.per_core if mine else NAN,
                f"Last layer vs {reference}, img/second (ours)": mine.per_core / base_ours if mine else NAN,
            }
        )
    return pd.DataFrame(rows)


def _cores(ours: dict[str, Throughput]) -> str:
    kinds = {
        "CPU threads" if d == "cpu" else "GPUs (one GPU counted as one core)" for t in ours.values() for d in t.devices
    }
    return " and ".join(sorted(kinds)) or "CPU threads"


def throughput_table(
    results: dict, values: pd.DataFrame, section: dict, scale: str
) -> tuple[pd.DataFrame, str, list[str]]:
    """(frame, title, notes) of Mehta et al.'s Table 10 from the study `mehta_table2` (`results`)."""
    if results.get("study") != f"mehta_{MEHTA_THROUGHPUT_STUDY}":
        raise ValueError(f"Mehta table10 reads the runs of mehta_{MEHTA_THROUGHPUT_STUDY}, not {results.get('study')}")
    paper = paper_table(values, "mehta", "table10")
    ours = measured(results, section["threads"])
    frame = _rows(paper, ours)
    widths = {feature_parts(path)["backbone"]: cache["width"] for path, cache in sorted(results["features"].items())}
    notes = [
        f"Scale: {scale}. Paper: images per second per core of DP-LAMB training on ImageNet, 64 TPUv4 cores, "
        "JAX; its last-layer runs still pass every example through the backbone on every visit (augmentation).",
        f"Ours: the private DP-LAMB runs of {results['study']} (every batch size, learning rate and seed), a linear "
        f"head on cached features: examples (the expected batch q n of every step) over the seconds of the training "
        f"steps times the {_cores(ours)} they ran on. The backbone's forward pass is not in it (the feature cache "
        "job made it once), so our cost grows with the feature width ("
        + ", ".join(f"{b} {w}" for b, w in widths.items())
        + "), not with the backbone's size.",
        "Theirs are TPU cores and ours CPU cores on another task: absolute numbers do not compare. Only the ratios "
        "between models do (the 'vs' columns), and only as far as a head's width stands for a model's size.",
        "Full and Speed Up keep the paper's value only: full fine-tuning is not a stage here.",
    ]
    missing = [model for model in paper.index if model_key(model) not in ours]
    if missing:
        notes.append(f"No stand-in for {', '.join(missing)}: the paper's value only.")
    if any(t.estimated for t in ours.values()):
        notes.append(
            "Some runs recorded neither the seconds of their steps nor their threads (results older than those "
            f"fields): their whole run time (with calibration and evaluation) and the study's configured "
            f"{section['threads']} thread(s) are used, so ours is an underestimate."
        )
    return frame, TITLE, notes
