"""Figures about privacy accounting."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

ACCOUNTANT_LABELS = {"rdp": "RDP (opacus)", "prv": "PRV (opacus)", "pld": "PLD (dp-accounting)"}


def epsilon_curve_figure(curve: pd.DataFrame) -> plt.Figure:
    """Epsilon against iterations (ViP Figure 6), one line per accountant."""
    figure, axis = plt.subplots(figsize=(5.5, 3.8))
    for column in [c for c in curve.columns if c.startswith("epsilon_")]:
        accountant = column.removeprefix("epsilon_")
        axis.plot(curve["steps"], curve[column], label=ACCOUNTANT_LABELS.get(accountant, accountant))
        axis.annotate(
            f"{curve[column].iloc[-1]:.2f}",
            (curve["steps"].iloc[-1], curve[column].iloc[-1]),
            textcoords="offset points",
            xytext=(4, 0),
            fontsize=8,
        )
    first = curve.iloc[0]
    axis.set_xlabel("iterations T")
    axis.set_ylabel(f"epsilon at delta = 1/(2n) = {first['delta']:.2g}")
    axis.set_title(f"q = {first['sample_rate']:.3g}, sigma = {first['sigma']:g}, n = {int(first['n']):,}", fontsize=9)
    axis.grid(alpha=0.3)
    axis.legend()
    return figure
