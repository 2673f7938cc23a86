"""The cells of a DP transfer study: its runs grouped by (row, column), each cell the chosen
learning rate's mean test accuracy over seeds. The study's selection (`dpvip.selection`,
recorded in its result) says how the learning rate is chosen: by the best mean validation
accuracy over seeds (each head held out a share of its training data), or by the best mean
test accuracy, as Mehta et al. tuned it (optimistic); a result that records none is an older
one, chosen on test. DP-RandP's probes have one learning rate per epsilon, so one group."""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass

from dpvip.errors import DpvipInputError
from dpvip.selection import selection_note

# A feature set's path (dpvip.plan.transfer_runs.FeatureSet.path): backbone/dataset/<recipe>_<crop><size>[_x<views>].
FEATURE_PATH = re.compile(
    r"(?P<backbone>[^/]+)/(?P<dataset>[^/]+)/(?P<recipe>[^_/]+)_(?P<crop>[a-z]+)(?P<size>\d+)(?:_x\d+)?"
)


@dataclass(frozen=True)
class Cell:
    mean: float
    std: float  # over seeds, ddof 1 (nan with one seed)
    lr: float
    seeds: int
    runs: list  # the chosen learning rate's runs
    selection: str = "test"  # what chose the learning rate: validation or test accuracy
    validation: float | None = None  # the chosen learning rate's mean validation accuracy

    @property
    def privacy(self) -> dict | None:
        return self.runs[0]["result"].get("privacy")

    @property
    def settings(self) -> dict:
        return self.runs[0]["settings"]


WHAT = "each cell's learning rate"


def study_selection(results: dict) -> dict:
    """The selection a study's result records; an older result without one chose on test."""
    recorded = results.get("selection")
    if recorded:
        return recorded
    if any("validation" in run["settings"] for run in results["runs"]):
        raise DpvipInputError(
            f"study {results.get('study')}: its runs held out a validation share but the result records no selection"
        )
    return {"mode": "test"}


def _cell(runs: list[dict], mode: str) -> Cell:
    by_lr = defaultdict(list)
    for run in runs:
        by_lr[run["settings"]["lr"]].append(run)
    score = "validation_accuracy" if mode == "validation" else "accuracy"
    missing = [run["key"] for run in runs if score not in run["result"]]
    if missing:
        raise DpvipInputError(f"choosing on {mode} accuracy, but run {missing[0]} recorded none")
    lr, chosen = max(by_lr.items(), key=lambda item: (statistics.fmean(r["result"][score] for r in item[1]), -item[0]))
    values = [r["result"]["accuracy"] for r in chosen]
    std = statistics.stdev(values) if len(values) > 1 else math.nan
    validation = statistics.fmean(r["result"]["validation_accuracy"] for r in chosen) if mode == "validation" else None
    return Cell(statistics.fmean(values), std, lr, len(values), chosen, mode, validation)


def study_cells(results: dict) -> dict[tuple[str, str], Cell]:
    """{(row, column): Cell} of a study's result file, each cell's learning rate chosen as
    the study's selection says (`study_selection`)."""
    mode = study_selection(results)["mode"]
    groups = defaultdict(list)
    for run in results["runs"]:
        groups[(run["row"], run["column"])].append(run)
    return {key: _cell(runs, mode) for key, runs in groups.items()}


def selection_notes(results: dict) -> list[str]:
    """How the study's cells chose their learning rate, and what the privacy guarantee covers
    then (as its result records it)."""
    recorded = study_selection(results)
    notes = [f"Selection: {selection_note(recorded, WHAT)}."]
    if recorded.get("privacy"):
        notes.append(f"Privacy of the pick: {recorded['privacy']}")
    return notes


def lr_curve(results: dict, row: str) -> list[tuple[float, float, float]]:
    """(lr, mean, std) over seeds of every learning rate of `row` (no choosing)."""
    groups = defaultdict(list)
    for run in results["runs"]:
        if run["row"] == row:
            groups[run["settings"]["lr"]].append(run["result"]["accuracy"])
    return [
        (lr, statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else math.nan) for lr, v in sorted(groups.items())
    ]


def feature_note(results: dict) -> str:
    """Which cached features the study read (backbone/dataset/recipe_crop<size>[_x<views>])."""
    return "features: " + "; ".join(sorted({run["features"] for run in results["runs"]}))


def feature_parts(path: str) -> dict[str, str]:
    """'syn_vip_micro/digits/blocks4_inception32_x4' -> backbone, dataset, recipe, crop, size."""
    match = FEATURE_PATH.fullmatch(path)
    if not match:
        raise ValueError(f"'{path}' is not a feature-set path (backbone/dataset/<recipe>_<crop><size>[_x<views>])")
    return match.groupdict()


def stand_in_label(results: dict, scale: str) -> str:
    """'ours: syn_vip_micro on digits (embedded)': the backbones and datasets a study's runs read."""
    parts = [feature_parts(run["features"]) for run in results["runs"]]
    backbones = ", ".join(sorted({p["backbone"] for p in parts}))
    datasets = ", ".join(sorted({p["dataset"] for p in parts}))
    return f"ours: {backbones} on {datasets} ({scale})"
