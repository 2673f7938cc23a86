"""The empirical privacy audit's table (each mechanism's claimed epsilon beside the lower
bounds its canaries give) and figure (the bounds against the claim over a grid of epsilons)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

COLUMNS = {
    "mechanism": "mechanism",
    "claimed_epsilon": "claimed epsilon",
    "delta": "delta",
    "accountant": "accountant",
    "sample_rate": "q",
    "noise_multiplier": "sigma",
    "steps": "T",
    "clip_norm": "C",
    "one_run_white_box": "epsilon one-run white-box",
    "tight_white_box": "epsilon tight white-box",
    "canaries": "canaries",
    "runs": "runs",
    "trials": "tight trials",
    "confidence": "confidence",
}
BLACK_BOX = "epsilon one-run black-box"


def empirical_table(records: list[dict]) -> tuple[pd.DataFrame, str, list[str]]:
    frame = pd.DataFrame([{label: record[key] for key, label in COLUMNS.items()} for record in records])
    frame.insert(frame.columns.get_loc("epsilon tight white-box") + 1, BLACK_BOX, float("nan"))
    best = frame[["epsilon one-run white-box", "epsilon tight white-box"]].max(axis=1)
    frame["audit / claimed"] = best / frame["claimed epsilon"]
    notes = [
        "Lower bounds on epsilon at the stated confidence from white-box gradient canaries of pre-clip norm C "
        "passed through each mechanism's own DP step (clipper, Poisson sampling, noise, ledger), with the "
        "mechanism's q, sigma, T, C and delta read from one of its runs; the attacker sees every update. "
        "A correct implementation stays at or below the claimed epsilon; a bound above it is a bug.",
        "one-run: Steinke, Nasr and Jagielski (2023), one run, each canary in with probability 1/2, guesses on "
        "the k highest and k lowest scores; tight: Nasr et al. (2023), the canaries' scores of all runs as "
        "trials with and without a canary, Clopper-Pearson bounds at a threshold chosen on half of them.",
        "The audit network is two Linear layers (one weight per canary), not the mechanism's model: the "
        "bounds measure the DP step as the mechanism configures it. DP-RandP's probe: its full-batch "
        "steps alone (the private mean is a separate Gaussian mechanism).",
        f"{BLACK_BOX}: not run yet (input canaries scored by the final model's loss); the column is empty.",
    ]
    return frame, "Empirical privacy audit: canaries against each mechanism's claim", notes


def empirical_figure(points: list[dict]) -> plt.Figure:
    """Lower bounds against the claimed epsilon of one full-batch step, with y = x."""
    claimed = [p["claimed_epsilon"] for p in points]
    figure, axis = plt.subplots(figsize=(5.0, 3.8))
    axis.plot(claimed, claimed, color="grey", linestyle="--", label="claimed (the accountant)")
    axis.plot(claimed, [p["one_run_white_box"] for p in points], marker="o", label="one-run white-box")
    axis.plot(claimed, [p["tight_white_box"] for p in points], marker="s", label="tight white-box")
    first = points[0]
    axis.set_xlabel("claimed epsilon")
    axis.set_ylabel(f"lower bound at {first['confidence']:.0%} confidence")
    axis.set_title(
        f"one full-batch DP step, delta {first['delta']:g}: {first['canaries']:,} canaries, "
        f"{first['runs']} runs (tight)",
        fontsize=9,
    )
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    return figure
