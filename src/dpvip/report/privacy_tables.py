"""The privacy audit table's notes (torch-free: the table job only reads the audit's CSVs)."""

from __future__ import annotations

from dpvip.privacy import ROUNDING_SLACK


def audit_notes(frame) -> list[str]:
    """The notes printed with the audit table: how to read it and what it found."""
    failing = frame.loc[frame["verdict"] == "fails", "claim"].tolist()
    large_delta = frame.loc[frame["delta_at_least_1_over_n"], "claim"].tolist()
    return [
        "epsilon_<accountant>: epsilon at the paper's (q, sigma, T, delta); rdp = opacus RDP, "
        "prv = opacus PRV (eps_error 0.01), pld = dp-accounting PLD. Full-batch (q = 1) rows are "
        "exact Gaussian DP under prv and pld.",
        f"verdict: under the accountant the paper used; 'holds (rounding)' means within "
        f"{ROUNDING_SLACK:.1%} above the printed epsilon.",
        "sigma_needed_<accountant>: the smallest sigma meeting the claimed epsilon; "
        "noise_saving_pct: how much less noise than the paper's sigma the tightest accountant needs.",
        "sigma_printed = False: the paper prints no sigma; it is derived with the paper's accountant.",
        "assumptions: values a paper leaves implicit, filled in as stated.",
        f"claims that fail under the paper's own accountant: {', '.join(failing) if failing else 'none'}.",
        "delta_n = delta * n; delta_at_least_1_over_n flags delta >= 1/n, a guarantee weak enough to allow "
        f"publishing an example outright: {', '.join(large_delta) if large_delta else 'none'}.",
    ]
