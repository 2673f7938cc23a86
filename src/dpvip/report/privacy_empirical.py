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
    "one_run_black_box": "epsilon one-run black-box",
    "tight_white_box": "epsilon tight white-box",
    "gdp_white_box": "epsilon tight white-box (Gaussian trade-off)",
    "canaries": "canaries",
    "black_box_canaries": "black-box canaries",
    "runs": "runs",
    "trials": "tight trials",
    "confidence": "confidence",
}
BOUNDS = [COLUMNS[key] for key in ("one_run_white_box", "one_run_black_box", "tight_white_box", "gdp_white_box")]


def empirical_table(records: list[dict]) -> tuple[pd.DataFrame, str, list[str]]:
    frame = pd.DataFrame([{label: record[key] for key, label in COLUMNS.items()} for record in records])
    frame["audit / claimed"] = frame[BOUNDS].max(axis=1) / frame["claimed epsilon"]
    notes = [
        "Lower bounds on epsilon at the stated confidence from white-box gradient canaries of pre-clip norm C "
        "passed through each mechanism's own DP step (clipper, Poisson sampling, noise, ledger), with the "
        "mechanism's q, sigma, T, C and delta read from one of its runs; the attacker sees every update. "
        "A correct implementation stays at or below the claimed epsilon; a bound above it is a bug.",
        "one-run: Steinke, Nasr and Jagielski (2023), one run, each canary in with probability 1/2, guesses on "
        "the k highest and k lowest scores; tight: Nasr et al. (2023), the canaries' scores of all runs as "
        "trials with and without a canary, Clopper-Pearson bounds at a threshold chosen on half of them; "
        "Gaussian trade-off: the same trials and bounds read as a mu-GDP trade-off (exact for a full-batch "
        "step, below the accountant for a subsampled one), converted to epsilon at delta.",
        "The white-box audit network is two Linear layers (one weight per canary), not the mechanism's model: "
        "the bounds measure the DP step as the mechanism configures it. DP-RandP's probe: its full-batch "
        "steps alone (the private mean is a separate Gaussian mechanism).",
        "black-box: input canaries scored by the released model's loss only; classifiers: a softmax layer on "
        "digits with one-dot out-of-distribution canaries of random labels; DP-MAE: a pico MAE on digits with "
        "uniform-noise canaries, scored by the fall of its reconstruction loss. Far weaker than white-box: "
        "it is what a user of the released model can show.",
    ]
    return frame, "Empirical privacy audit: canaries against each mechanism's claim", notes


def empirical_figure(points: list[dict]) -> plt.Figure:
    """Lower bounds against the claimed epsilon of one full-batch step, with y = x."""
    claimed = [p["claimed_epsilon"] for p in points]
    figure, axis = plt.subplots(figsize=(5.0, 3.8))
    axis.plot(claimed, claimed, color="grey", linestyle="--", label="claimed (the accountant)")
    axis.plot(claimed, [p["one_run_white_box"] for p in points], marker="o", label="one-run white-box")
    axis.plot(claimed, [p["tight_white_box"] for p in points], marker="s", label="tight white-box")
    axis.plot(claimed, [p["gdp_white_box"] for p in points], marker="^", label="tight white-box, Gaussian trade-off")
    axis.plot(claimed, [p["one_run_black_box"] for p in points], marker="x", label="one-run black-box")
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
