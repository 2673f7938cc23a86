"""ViP Figure 1 (linear probing and COCO AP bars against other models) and Figure 5 (downstream
accuracy against model size, (Syn)-ViP vs random initialisation), from evaluation results."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dpvip.report.paper_values import paper_table

FIGURE1_PROBE_ROWS = ("TAN", "AlexNet", "SimCLR")  # Table 1 rows beside ViP-Large (Table 9)
FIGURE1_COCO_ROWS = ("SimCLR", "Mask R-CNN")  # Table 4 rows beside ViP-Base


def _bars(axis, groups: list[str], series: dict[str, list[float]], ylabel: str, title: str) -> None:
    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    for position, (name, heights) in enumerate(series.items()):
        hatch = "//" if "(ours" in name else None
        bars = axis.bar(
            x + (position - (len(series) - 1) / 2) * width, np.nan_to_num(heights), width, label=name, hatch=hatch
        )
        axis.bar_label(bars, labels=["—" if np.isnan(h) else f"{h:.1f}" for h in heights], fontsize=6)
    axis.set_xticks(x, groups, fontsize=8)
    axis.set_ylabel(ylabel)
    axis.set_title(title, fontsize=9)
    axis.legend(fontsize=6)


def figure1(
    values: pd.DataFrame,
    probe: dict[str, float],
    coco: dict[str, float],
    ours_probe: str,
    ours_coco: str,
    ours_on: str = "",
) -> plt.Figure:
    """`probe`: {dataset: top-1 %} of our largest ViP (`ours_probe` names it); `coco`:
    {'COCO AP box'/'COCO AP mask': AP points} of our main ViP (`ours_coco`); `ours_on` says
    what our bars ran on (stand-ins, scale), for their legend."""
    table1, table9, table4 = (paper_table(values, "vip", t) for t in ("table1", "table9", "table4"))
    datasets = [d for d in table1.columns if d != "# pre-train samples"]
    probe_series = {row: [table1.at[row, d] for d in datasets] for row in FIGURE1_PROBE_ROWS}
    probe_series["ViP-L (paper)"] = [table9.at["ViP-L", d] for d in datasets]
    probe_series[_ours(ours_probe, ours_on)] = [probe.get(d, np.nan) for d in datasets]
    metrics = ["COCO AP box", "COCO AP mask"]
    coco_series = {row: [table4.at[row, m] for m in metrics] for row in FIGURE1_COCO_ROWS}
    coco_series["ViP-B (paper)"] = [table4.at["ViP", m] for m in metrics]
    coco_series[_ours(ours_coco, ours_on)] = [coco.get(m, np.nan) for m in metrics]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [2.2, 1]})
    _bars(left, datasets, probe_series, "linear probing top-1 (%)", "ViP Fig. 1 (left): linear probing")
    _bars(right, ["AP box", "AP mask"], coco_series, "AP (points)", "ViP Fig. 1 (right): COCO")
    figure.tight_layout()
    return figure


def _ours(name: str, ours_on: str) -> str:
    return f"{name} (ours, {ours_on})" if ours_on else f"{name} (ours)"


def figure5(
    lines: dict[str, dict[float, dict[str, float]]],
    metrics: list[str],
    paper_sizes: dict[str, dict[float, float]] | None = None,
    ours_on: str = "",
) -> plt.Figure:
    """`lines`: {initialisation: {MAE parameters (M): {metric: value}}}; one panel per
    metric; `paper_sizes` ({metric: {parameters: value}}) adds Table 9's ViP-S/B/L points;
    `ours_on` says what our lines ran on (stand-ins, scale)."""
    figure, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.4), squeeze=False)
    for axis, metric in zip(axes[0], metrics):
        for name, points in lines.items():
            sizes = sorted(points)
            axis.plot(
                sizes,
                [points[s].get(metric, np.nan) for s in sizes],
                marker="o",
                label=_ours(name, ours_on),
                color="grey" if "random" in name else "tab:blue",
            )
        if paper_sizes and metric in paper_sizes:
            sizes = sorted(paper_sizes[metric])
            axis.plot(
                sizes,
                [paper_sizes[metric][s] for s in sizes],
                marker="s",
                linestyle="--",
                color="tab:blue",
                alpha=0.5,
                label="(Syn)-ViP init (paper, Table 9)",
            )
        axis.set_xscale("log")
        axis.set_xlabel("MAE parameters (M)")
        axis.set_ylabel(f"{metric} top-1 (%)")
        axis.legend(fontsize=7)
    figure.suptitle("ViP Fig. 5: model size, (Syn)-ViP vs random initialisation", fontsize=10)
    figure.tight_layout()
    return figure
