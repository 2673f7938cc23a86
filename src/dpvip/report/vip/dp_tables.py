"""The DP pre-training runs as a table: each run's mechanism (n, B, T, q, delta), the noise
multiplier our accountant calibrated beside the one ViP printed for the same (B, n)
(Table 10), the epsilon spent and the final training loss."""

from __future__ import annotations

import math
import re

import pandas as pd

from dpvip.report.common.paper_values import paper_table


def initialisation(init: str) -> str:
    """'random init', or the (Syn)-ViP checkpoint a run starts from (a shorter one names its epochs)."""
    if init == "random":
        return "random init"
    shorter = re.search(r"syn_vip_\w+_e(\d+)/", init)
    return f"(Syn)-ViP init, {shorter.group(1)} epochs of synthetic pre-training" if shorter else "(Syn)-ViP init"


NOTES = [
    "σ (ours) is calibrated before training from (ε, δ = 1/(2n), q = B/n, T) with the run's accountant; "
    "σ (paper) is ViP Table 10's for the same batch size and dataset size, where the paper has one.",
    "The loss is the mean per-example MAE loss of the last logged steps (not privatised; a diagnostic).",
]


def _paper_sigmas(values: pd.DataFrame) -> dict[tuple[int, int], float]:
    """{(batch size, millions of training examples): sigma} from ViP Table 10."""
    table = paper_table(values, "vip", "table10").dropna(subset=["Noise sigma"])
    return {
        (int(row["Batch Size"]), int(row["# Train data"])): float(row["Noise sigma"]) for _, row in table.iterrows()
    }


def vip_dp_runs(runs: dict[str, tuple[dict, list[dict]]], values: pd.DataFrame) -> pd.DataFrame:
    """`runs`: {run name: (privacy ledger, metrics records)}."""
    paper = _paper_sigmas(values)
    rows = []
    for name, (privacy, records) in runs.items():
        n = privacy["examples"]
        batch = round(privacy["sample_rate"] * n)
        last = records[-1] if records else {}
        rows.append(
            {
                "run": name,
                "init": initialisation(privacy["init"]).removesuffix(" init"),
                "n": n,
                "B": batch,
                "T": privacy["planned_steps"],
                "q": privacy["sample_rate"],
                "δ": privacy["delta"],
                "C": privacy["clip_norm"],
                "accountant": privacy["accountant"],
                "σ (ours)": privacy["noise_multiplier"],
                "σ (paper)": paper.get((batch, round(n / 1e6)), math.nan) if n >= 1e6 else math.nan,
                "ε target": privacy["target_epsilon"],
                "ε spent": privacy["epsilon_spent"],
                "steps done": privacy["steps_done"],
                "final loss": last.get("loss", math.nan),
            }
        )
    return pd.DataFrame(rows)
