"""The privacy audit table and its notes (torch-free: the table job only reads the audit's CSVs)."""

from __future__ import annotations

import pandas as pd

from dpvip.audit import ROUNDING_SLACK
from dpvip.privacy import ACCOUNTANTS


def audit_frame(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The per-paper audits in one table, every epsilon_<accountant> column together just
    before the verdict: a paper's own accountant (PRV for DP-RandP) is computed for its rows
    only, and would otherwise land after the last column, far from the verdict it decides."""
    frame = pd.concat(frames, ignore_index=True)
    epsilons = [f"epsilon_{name}" for name in ACCOUNTANTS if f"epsilon_{name}" in frame.columns]
    others = [column for column in frame.columns if column not in epsilons]
    at = others.index("verdict")
    return frame[[*others[:at], *epsilons, *others[at:]]]


def audit_notes(frame) -> list[str]:
    """The notes printed with the audit table: how to read it and what it found."""
    failing = frame.loc[frame["verdict"].str.startswith("fails"), "claim"].tolist()
    large_delta = frame.loc[frame["delta_at_least_1_over_n"], "claim"].tolist()
    return [
        "epsilon_<accountant>: epsilon at the paper's (q, sigma, T, delta); rdp = opacus RDP, "
        "prv = opacus PRV (eps_error 0.01), pld = dp-accounting PLD. Full-batch (q = 1) rows are "
        "exact Gaussian DP under prv and pld.",
        f"verdict: under the accountant the paper used (paper_accountant), whose epsilon_<accountant> column "
        "is filled for every row even where the audit's accountants leave it out (a column empty in some rows "
        f"is one only some papers used); 'holds (rounding)' means within {ROUNDING_SLACK:.1%} above the "
        "printed epsilon; 'holds (printed precision)' means it fails at the values as printed but holds at "
        "values that print the same (sigma and n half a printed unit up: epsilon_favourable_rounding); "
        "'fails under our assumptions' names the values the paper leaves implicit that the failure rests on.",
        "sigma_needed_<accountant>: the smallest sigma meeting the claimed epsilon; "
        "noise_saving_pct: how much less noise than the paper's sigma the tightest accountant needs.",
        "sigma_printed = False: the paper prints no sigma; it is derived with the paper's accountant.",
        "assumptions: values a paper leaves implicit, filled in as stated.",
        f"claims that fail under the paper's own accountant: {', '.join(failing) if failing else 'none'}.",
        "delta_n = delta * n; delta_at_least_1_over_n flags delta >= 1/n, a guarantee weak enough to allow "
        f"publishing an example outright: {', '.join(large_delta) if large_delta else 'none'}.",
    ]
