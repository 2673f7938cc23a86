"""The contact sheet of synthetic samples (as ViP Figure 2 and DP-RandP Figure 3 show them)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def _caption(meta: dict) -> str:
    if "program" in meta:
        return f"#{meta['index']} prog {meta['program']} t={meta['time']:.1f}"
    if "programs" in meta:
        return f"#{meta['index']} mix of {len(meta['programs'])}"
    if "network" in meta:
        return f"#{meta['index']} net {meta['network']}"
    return f"#{meta['index']}"


def contact_sheet(rows: list[tuple[str, list[tuple[np.ndarray, dict]]]]) -> plt.Figure:
    """One row per dataset: its label, then its samples, each captioned with its identity."""
    columns = max(len(samples) for _, samples in rows)
    figure, axes = plt.subplots(len(rows), columns, figsize=(1.3 * columns + 1.2, 1.45 * len(rows)), squeeze=False)
    for row, (label, samples) in zip(axes, rows):
        for column, axis in enumerate(row):
            axis.set_xticks([])
            axis.set_yticks([])
            if column < len(samples):
                image, meta = samples[column]
                axis.imshow(image, interpolation="nearest")
                axis.set_xlabel(_caption(meta), fontsize=5.5)
            else:
                axis.axis("off")
        row[0].set_ylabel(label, fontsize=7.5, rotation=0, ha="right", va="center", labelpad=8)
    figure.suptitle("Synthetic images from random processes (no natural images)", fontsize=10)
    figure.tight_layout()
    return figure
