"""ViP Figure 1 (linear probing and COCO AP bars against other models) and Figure 5 (downstream
accuracy against model size, (Syn)-ViP vs random initialisation), from evaluation results.

The paper's numbers and ours sit on separate axes, one row each: at the embedded scale ours are
measured on stand-ins (scikit-learn digits for ImageNet-1K, generated shapes for COCO), whose
accuracy is on another scale than the paper's (10 classes, not 1,000), so one axis would show a
tiny model "beating" every model of the paper. Our axes name the data they were measured on, and
carry its chance level; legends sit below their axes, where they cover nothing.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import NullFormatter

from dpvip.report.claims.chance import Chance
from dpvip.report.common.paper_values import paper_table
from dpvip.report.vip.readings import chance, trivial_baselines

FIGURE1_PROBE_ROWS = ("TAN", "AlexNet", "SimCLR")  # Table 1 rows beside ViP-Large (Table 9)
FIGURE1_COCO_ROWS = ("SimCLR", "Mask R-CNN")  # Table 4 rows beside ViP-Base
COCO_METRICS = ("COCO AP box", "COCO AP mask")
TASK_DATA = {"coco": "COCO 2017", "ade20k": "ADE20K"}  # what a result without a dataset ran for


def data_used(results: list[dict], column: str) -> tuple[str, Chance | None]:
    """(what `column` of ours was measured on, its chance level): 'scikit-learn digits (standing
    in for ImageNet-1K)', or the dataset itself where no stand-in was used."""
    for result in results:
        if column in result["columns"]:
            evaluation, stand_in = result["evaluation"], result.get("data", {}).get("stand_in")
            name = evaluation.get("dataset") or TASK_DATA.get(evaluation["task"], column)
            return (f"{stand_in} (standing in for {name})" if stand_in else name), chance(result)
    return column, None


def _legend_below(axis, gap: float = 0.16) -> None:
    """The legend under the axis (`gap`: axis heights below it, clear of the tick labels)."""
    axis.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -gap), ncol=2, frameon=False)


def _chance_line(axis, level: Chance | None) -> None:
    if level is not None:
        axis.axhline(
            level.level, color="red", linestyle=":", linewidth=1, label=f"chance: {level.level:.3g}% ({level.data})"
        )


def _bars(axis, groups: list[str], series: dict[str, list[float]], ylabel: str, title: str, ours: bool) -> None:
    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    for position, (name, heights) in enumerate(series.items()):
        offset = (position - (len(series) - 1) / 2) * width
        bars = axis.bar(x + offset, np.nan_to_num(heights), width, label=name, hatch="//" if ours else None)
        axis.bar_label(bars, labels=["—" if np.isnan(h) else f"{h:.1f}" for h in heights], fontsize=6)
    axis.set_xticks(x, groups, fontsize=7)
    axis.set_xlim(
        -0.5 - max(0, 3 - len(groups)) / 2, len(groups) - 0.5 + max(0, 3 - len(groups)) / 2
    )  # bars not wider than 3 groups' would be
    axis.set_ylabel(ylabel, fontsize=8)
    axis.set_title(title, fontsize=9)


def figure1(
    values: pd.DataFrame, results: list[dict], ours_probe: str, ours_coco: str, scale: str = "embedded"
) -> plt.Figure:
    """Top row the paper's bars (Tables 1, 9, 4), bottom row ours: the linear probing of our
    largest ViP (`ours_probe`) and the COCO AP of our main ViP (`ours_coco`), from `results`
    (evaluation results; AP in points as the paper prints it)."""
    table1, table9, table4 = (paper_table(values, "vip", t) for t in ("table1", "table9", "table4"))
    datasets = [d for d in table1.columns if d != "# pre-train samples"]
    probe_series = {f"{row} (paper, Table 1)": [table1.at[row, d] for d in datasets] for row in FIGURE1_PROBE_ROWS}
    probe_series["ViP-L (paper, Table 9)"] = [table9.at["ViP-L", d] for d in datasets]
    coco_series = {f"{row} (paper, Table 4)": [table4.at[row, m] for m in COCO_METRICS] for row in FIGURE1_COCO_ROWS}
    coco_series["ViP-B (paper, Table 4)"] = [table4.at["ViP", m] for m in COCO_METRICS]
    figure, axes = plt.subplots(
        2, 2, figsize=(11, 8.5), gridspec_kw={"width_ratios": [2.2, 1]}, layout="constrained", squeeze=False
    )
    (paper_probe, paper_coco), (our_probe, our_coco) = axes
    ap = ["AP box", "AP mask"]
    _bars(paper_probe, datasets, probe_series, "top-1 (%)", "Paper: linear probing (Fig. 1 left)", ours=False)
    _bars(paper_coco, ap, coco_series, "AP (points)", "Paper: COCO (Fig. 1 right)", ours=False)
    probe = _ours_of(results, ours_probe, "linear_probe")
    probed = [d for d in datasets if d in probe]
    labels = [textwrap.fill(data_used(results, d)[0], 28) for d in probed]
    _bars(
        our_probe,
        labels,
        {f"{ours_probe} (ours, {scale} scale)": [probe[d] for d in probed]},
        "top-1 (%) on the data named below each bar",
        f"Ours, {scale} scale: linear probing on stand-ins, not the paper's data or scale",
        ours=True,
    )
    levels = {data_used(results, d)[1] for d in probed} - {None}
    for level in levels:
        _chance_line(our_probe, level)
    coco = _ours_of(results, ours_coco, "coco")
    coco_data = data_used(results, COCO_METRICS[0])[0]
    coco_series = {f"{ours_coco} (ours, {scale} scale)": [coco.get(m, np.nan) for m in COCO_METRICS]}
    trivial = trivial_baselines([r for r in results if r["evaluation"]["task"] == "coco"], list(COCO_METRICS))
    if trivial:  # what a detector that learnt nothing scores on the same images
        coco_series[f"trivial predictor (ours, {scale} scale: {trivial[COCO_METRICS[0]][1]})"] = [
            trivial.get(m, (np.nan,))[0] for m in COCO_METRICS
        ]
    _bars(
        our_coco,
        ap,
        coco_series,
        textwrap.fill(f"AP (points) on {coco_data}", 40),
        f"Ours, {scale} scale: detection",
        ours=True,
    )
    for axis in axes.flat:
        _legend_below(axis)
    figure.suptitle("ViP Fig. 1: the paper's bars (top) and ours (bottom), on separate axes", fontsize=10)
    return figure


def _ours_of(results: list[dict], backbone: str, task: str) -> dict[str, float]:
    return {
        column: value  # COCO AP in points, as the paper prints it
        for r in results
        if r["evaluation"]["backbone"] == backbone and r["evaluation"]["task"] == task
        for column, value in r["columns"].items()
        if value is not None
    }


def _size_ticks(axis, sizes: list[float]) -> None:
    """Ticks at the drawn model sizes only, labelled in millions: a log axis's own minor labels
    ('2×10^-1', '3×10^-1', ...) run into each other over a narrow range."""
    axis.set_xscale("log")
    axis.set_xticks(sizes, [f"{s:.3g}M" for s in sizes], rotation=30, fontsize=7)
    axis.xaxis.set_minor_formatter(NullFormatter())
    axis.set_xlabel("MAE parameters")


def figure5(
    lines: dict[str, dict[float, dict[str, float]]],
    metrics: list[str],
    results: list[dict],
    paper_sizes: dict[str, dict[float, float]] | None = None,
    scale: str = "embedded",
) -> plt.Figure:
    """`lines`: {initialisation: {MAE parameters (M): {metric: value}}}, ours; one column per
    metric, ours on top (axis named after the data it was measured on, from `results`), the
    paper's Table 9 ViP-S/B/L points below (`paper_sizes`: {metric: {parameters: value}})."""
    paper_sizes = paper_sizes or {}
    rows = 2 if any(m in paper_sizes for m in metrics) else 1
    figure, axes = plt.subplots(
        rows, len(metrics), figsize=(4.6 * len(metrics), 3.6 * rows), squeeze=False, layout="constrained"
    )
    for column, metric in enumerate(metrics):
        axis = axes[0][column]
        data, level = data_used(results, metric)
        drawn = set()
        for name, points in lines.items():
            sizes = sorted(points)
            drawn |= set(sizes)
            axis.plot(
                sizes,
                [points[s].get(metric, np.nan) for s in sizes],
                marker="o",
                label=f"{name} (ours, {scale}, 1 run a point)",
                color="grey" if "random" in name else "tab:blue",
            )
        _chance_line(axis, level)
        _size_ticks(axis, sorted(drawn))
        axis.set_ylabel(textwrap.fill(f"{_measure(metric)} on {data}", 36), fontsize=8)
        axis.set_title(f"Ours ({scale} scale): {metric}", fontsize=9)
        _legend_below(axis, 0.3)
        if rows == 2:
            _paper_panel(axes[1][column], metric, paper_sizes.get(metric))
    figure.suptitle("ViP Fig. 5: model size, (Syn)-ViP vs random initialisation (ours top, paper below)", fontsize=10)
    return figure


def _measure(metric: str) -> str:
    shots = metric.rsplit(" ", 1)[-1] if metric.endswith("-shot") else ""
    return f"{shots} top-1 (%)" if shots else "linear probing top-1 (%)"


def _paper_panel(axis, metric: str, points: dict[float, float] | None) -> None:
    if not points:
        axis.set_axis_off()
        axis.text(0.5, 0.5, f"the paper prints no model sizes for {metric}", ha="center", fontsize=8)
        return
    sizes = sorted(points)
    axis.plot(sizes, [points[s] for s in sizes], marker="s", linestyle="--", color="tab:blue", label="ViP-S/B/L")
    _size_ticks(axis, sizes)
    axis.set_ylabel(f"{metric} top-1 (%)", fontsize=8)
    axis.set_title(f"Paper (Table 9): {metric}", fontsize=9)
    _legend_below(axis, 0.3)
