"""The empirical privacy audit's table (each mechanism's claimed epsilon beside the lower
bounds its canaries give) and figure (the bounds against the claim over a grid of epsilons)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from dpvip.audit.bounds import AUDIT_COLUMNS, CANNOT_REFUTE, VALID_BOUNDS, cannot_refute

COLUMNS = {
    "mechanism": "mechanism",
    "claimed_epsilon": "claimed epsilon",
    "tightest_epsilon": "tightest epsilon",
    "tightest_accountant": "tightest accountant",
    "delta": "delta",
    "accountant": "accountant",
    "sample_rate": "q",
    "noise_multiplier": "sigma",
    "steps": "T",
    "clip_norm": "C",
    **{key: f"epsilon {label}" for key, label in AUDIT_COLUMNS.items()},
    "canaries": "canaries",
    "canary_norm": "canary norm / C",
    "black_box_canaries": "black-box canaries",
    "runs": "runs",
    "trials": "tight trials",
    "confidence": "confidence",
}
BOUNDS = [COLUMNS[key] for key in VALID_BOUNDS]
HEADLINE = "audit epsilon (largest valid bound, joint confidence)"
MARKERS = {"one_run_white_box": "o", "one_run_black_box": "x", "tight_white_box": "s", "gdp_white_box": "^"}


def power_label(key: str) -> str:
    return f"power {AUDIT_COLUMNS[key]}"


def empirical_table(records: list[dict]) -> tuple[pd.DataFrame, str, list[str]]:
    rows = []
    for record in records:
        row = {}
        for key, label in COLUMNS.items():
            row[label] = record[key]
            if key in AUDIT_COLUMNS:  # each bound's power beside it
                row[power_label(key)] = record[f"{key}_power"]
        row[CANNOT_REFUTE] = "; ".join(cannot_refute(record)) or "none"
        rows.append(row)
    frame = pd.DataFrame(rows)
    # the headline: the largest valid bound, each column read at the Bonferroni confidence so
    # that the largest holds at the stated one (the estimate is no evidence against a
    # subsampled mechanism's claim)
    frame[HEADLINE] = [record["headline_epsilon"] for record in records]
    frame["audit / claimed"] = frame[HEADLINE] / frame["claimed epsilon"]
    frame["audit / tightest"] = frame[HEADLINE] / frame["tightest epsilon"]
    notes = [
        "Lower bounds on epsilon at the stated confidence from white-box gradient canaries (pre-clip norm: "
        "canary norm x C, so the clipper is audited too) passed through each mechanism's own DP step "
        "(clipper, Poisson sampling, noise, ledger), with the "
        "mechanism's q, sigma, T, C and delta read from one of its runs; the attacker sees every update. "
        "A correct implementation stays at or below the claimed epsilon; a bound above it is a bug.",
        "power <column>: the largest value the column can report with its canaries, guesses, runs, delta and "
        "confidence (every guess right, no error on a threshold; 50 is the search's ceiling). A column whose "
        "power is below the claimed "
        f"epsilon could not have refuted the claim whatever the code did ('{CANNOT_REFUTE}' lists them): its bound "
        "is no evidence that the mechanism keeps its claim.",
        "one-run: Steinke, Nasr and Jagielski (2023), one run, each canary in with probability 1/2, guesses on "
        "the k highest and k lowest scores; tight: Nasr et al. (2023), the canaries' scores of all runs as "
        "trials with and without a canary, Clopper-Pearson bounds at the threshold whose Clopper-Pearson "
        "bound is largest on half of them, the bound read on the other half. White-box scores: the log "
        "likelihood ratio of a canary's T per-step observations (Dirac gradient canaries, Nasr et al. 2023).",
        "estimate (Gaussian trade-off, not a bound): the same trials read as a mu-GDP trade-off, converted to "
        "epsilon at delta. It is a lower bound only where the trade-off is Gaussian (exact for a full-batch "
        "step); for a Poisson-subsampled mechanism it is an estimate, and it can exceed the true epsilon. "
        f"{HEADLINE}: the largest of the valid bounds (one-run and tight columns), each recomputed at "
        "1 - (1 - confidence) / 3 (Bonferroni), so that the largest holds at the stated confidence jointly; "
        "audit / claimed and audit / tightest divide it. The tight audit's halves are drawn at random from a "
        "recorded seed (split_seed in privacy_empirical.json). tightest epsilon: the smallest epsilon that RDP and PLD "
        "give the same (q, sigma, T, delta) (the claims of DP-MAE and DP fine-tuning are RDP figures, which "
        "PLD tightens by about 1.5): audit / tightest is the ratio a bug worth less than that gap shows in.",
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
    figure, axis = plt.subplots(figsize=(6.5, 6.0))
    axis.plot(claimed, claimed, color="grey", linestyle="--", label="claimed (the accountant)")
    # the claims and the valid bounds' powers set the scale; a power above it is named, not drawn
    top = 1.15 * max(claimed + [p[f"{key}_power"] for p in points for key in VALID_BOUNDS])
    for key, label in AUDIT_COLUMNS.items():
        (line,) = axis.plot(claimed, [p[key] for p in points], marker=MARKERS[key], label=label)
        power = [p[f"{key}_power"] for p in points]
        span = f"{min(power):.3g}" + (f"-{max(power):.3g}" if max(power) > min(power) else "")
        above = f" ({span}: off the plot)" if min(power) > top else ""
        axis.plot(  # its power: the most it could show, dotted in its colour
            claimed, power, linestyle=":", color=line.get_color(), label=f"{label}, power{above}"
        )
    axis.set_ylim(bottom=0.0, top=top)
    first = points[0]
    axis.set_xlabel("claimed epsilon")
    axis.set_ylabel(f"lower bound at {first['confidence']:.0%} confidence")
    axis.set_title(
        f"one full-batch DP step, delta {first['delta']:g}: {first['canaries']:,} canaries, "
        f"{first['runs']} runs (tight)",
        fontsize=9,
    )
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    figure.tight_layout()
    return figure
