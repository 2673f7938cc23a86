"""ViP's DP training-loss figures, from each run's metrics and privacy ledger:
Figure 3a (dataset size), 3b (synthetic vs random initialisation), 4a (model size),
4b (batch size at equal compute) and 7 (model size from random initialisation)."""

from __future__ import annotations

import matplotlib.pyplot as plt

from dpvip.report.vip.dp_tables import initialisation
from dpvip.report.common.pretrain_figures import loss_curves


def _millions(count: int) -> str:
    return f"{count / 1e6:g}M" if count >= 1e6 else f"{count:,}"


def _label(figure: str, run: str, privacy: dict) -> str:
    sigma = f"σ={privacy['noise_multiplier']:.3g}"
    batch = round(privacy["sample_rate"] * privacy["examples"])
    model = run.removeprefix("vip_").removesuffix("_random")
    return {
        "vip_figure3a": f"n={_millions(privacy['examples'])}, {sigma}",
        "vip_figure3b": initialisation(privacy["init"]),
        "vip_figure4b": f"B={batch:,}, {sigma}",
    }.get(figure, model)


FIGURES = {  # title, legend title, x axis
    "vip_figure3a": ("ViP Fig. 3a: training samples n at equal ε", "dataset", "step"),
    "vip_figure3b": ("ViP Fig. 3b: (Syn)-ViP (full and short) vs random initialisation", "initialisation", "step"),
    "vip_figure4a": ("ViP Fig. 4a: model size, (Syn)-ViP initialisation", "model", "step"),
    "vip_figure4b": ("ViP Fig. 4b: batch size at equal compute and ε", "batch", "examples"),
    "vip_figure7": ("ViP Fig. 7: model size, random initialisation", "model", "step"),
}


def dp_loss_figure(figure: str, runs: dict[str, tuple[dict, list[dict]]], epsilon_note: str = "") -> plt.Figure:
    """`runs`: {run name: (privacy ledger, metrics records)} in legend order."""
    title, legend, x = FIGURES[figure]
    curves = {}
    for run, (privacy, records) in runs.items():
        batch = privacy["sample_rate"] * privacy["examples"]
        # Figure 4b compares at equal compute: per-example gradients (expected), not steps.
        curves[_label(figure, run, privacy)] = [r | {"examples": r["step"] * batch} for r in records]
    x_label = "per-example gradients (step × expected batch)" if x == "examples" else "DP step"
    return loss_curves(curves, title + epsilon_note, x=x, x_label=x_label, legend=legend)
