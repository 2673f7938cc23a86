"""Figures of pre-training runs: loss curves, and reconstructions of held-out images."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def loss_curves(
    runs: dict[str, list[dict]], title: str, x: str = "epoch", x_label: str = "epoch", legend: str = "model"
) -> plt.Figure:
    """Training loss (and learning rate, lighter, on a second axis) against `x`, per run."""
    figure, loss_axis = plt.subplots(figsize=(6.4, 4.0))
    lr_axis = loss_axis.twinx()
    for colour, (name, records) in zip(plt.cm.tab10.colors, runs.items()):
        xs = [r[x] for r in records]
        loss_axis.plot(xs, [r["loss"] for r in records], color=colour, label=name)
        lr_axis.plot(xs, [r["lr"] for r in records], color=colour, alpha=0.3, linestyle="--")
    loss_axis.set_xlabel(x_label)
    loss_axis.set_ylabel("MAE loss (masked patches)")
    lr_axis.set_ylabel("learning rate (dashed)")
    loss_axis.set_title(title)
    loss_axis.grid(alpha=0.3)
    loss_axis.legend(title=legend, loc="upper right")
    return figure


def reconstruction_panel(panels: dict[str, dict[str, np.ndarray]]) -> plt.Figure:
    """Per model, three rows (original, masked input, reconstruction), one column per image."""
    kinds = ("original", "masked", "reconstruction")
    columns = max(len(p["original"]) for p in panels.values())
    rows = len(kinds) * len(panels)
    figure, axes = plt.subplots(rows, columns, figsize=(1.3 * columns, 1.35 * rows), squeeze=False)
    for block, (name, panel) in enumerate(panels.items()):
        for offset, kind in enumerate(kinds):
            row = block * len(kinds) + offset
            for column in range(columns):
                axis = axes[row, column]
                axis.set_xticks([])
                axis.set_yticks([])
                if column < len(panel[kind]):
                    axis.imshow(panel[kind][column], interpolation="nearest")
                if kind == "reconstruction" and column < len(panel["loss"]):
                    axis.set_xlabel(f"loss {panel['loss'][column]:.3f}", fontsize=7)
            axes[row, 0].set_ylabel(f"{name}\n{kind}" if offset == 0 else kind, fontsize=8)
    figure.tight_layout()
    return figure
