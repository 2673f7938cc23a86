"""The cells of a DP transfer study: its runs grouped by (row, column), each cell the best
learning rate's mean accuracy over seeds (Mehta et al. tuned the learning rate only, on test
accuracy; DP-RandP's probes have one learning rate per epsilon, so one group)."""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass

# A feature set's path (dpvip.plan.transfer.FeatureSet.path): backbone/dataset/<recipe>_<crop><size>[_x<views>].
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

    @property
    def privacy(self) -> dict | None:
        return self.runs[0]["result"].get("privacy")

    @property
    def settings(self) -> dict:
        return self.runs[0]["settings"]


def _cell(runs: list[dict]) -> Cell:
    by_lr = defaultdict(list)
    for run in runs:
        by_lr[run["settings"]["lr"]].append(run)
    lr, chosen = max(
        by_lr.items(), key=lambda item: (statistics.fmean(r["result"]["accuracy"] for r in item[1]), -item[0])
    )
    values = [r["result"]["accuracy"] for r in chosen]
    std = statistics.stdev(values) if len(values) > 1 else math.nan
    return Cell(statistics.fmean(values), std, lr, len(values), chosen)


def study_cells(results: dict) -> dict[tuple[str, str], Cell]:
    """{(row, column): Cell} of a study's result file."""
    groups = defaultdict(list)
    for run in results["runs"]:
        groups[(run["row"], run["column"])].append(run)
    return {key: _cell(runs) for key, runs in groups.items()}


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
