"""The privacy of a published cell picked from a grid of DP runs on the same private data.

Mehta et al. tune the learning rate on test accuracy, and we by default on a validation share
held out of the private training split (`dpvip.selection`): either way each published cell is
the best of a grid of DP runs, all trained on the same private features. One run's (epsilon, delta) does
not cover the pick; the composition of every run of the grid does (each run is a mechanism on
the same data; choosing among their outputs is post-processing of all of them). The runs of
one mechanism (the same q, sigma, T, C, delta) in a study are its grid, seeds included: the
composition is taken over all of them, with the PLD accountant (PRV where PLD cannot).

ViP's linear-probe grid needs none: the probe trains on downstream data, not on the private
set, and the DP-MAE weights it reads are one release.
"""

from __future__ import annotations

from dpvip.errors import DpvipInputError
from dpvip.privacy import accounting
from dpvip.report.privacy.mechanisms import mechanisms

COMPOSITION_ACCOUNTANT = "pld"


def grid_compositions(records: list) -> list[dict]:
    """For each mechanism of several noisy runs in `records`: the runs, one run's epsilon and
    the epsilon of composing them all (at the same delta)."""
    found = []
    for m in mechanisms(records):
        if m["runs"] < 2 or not m["sigma"] or not m["steps"] or not m["delta"]:
            continue
        one = accounting.Mechanism(m["q"], m["sigma"], m["steps"])
        try:
            composed = accounting.epsilon([one] * m["runs"], m["delta"], COMPOSITION_ACCOUNTANT)
        except DpvipInputError:
            composed = accounting.epsilon([one] * m["runs"], m["delta"], "prv")
        found.append(
            {
                "runs": m["runs"],
                "single_run_epsilon": m["epsilon"],
                "composed_epsilon": composed.epsilon,
                "delta": m["delta"],
                "accountant": composed.accountant,
            }
        )
    return found


def picked_on(records: list) -> str:
    """What the study results among `records` chose their cells on (their `selection`):
    validation accuracy only when every one of them did; test accuracy otherwise."""
    modes = {(r.get("selection") or {}).get("mode", "test") for r in records if isinstance(r, dict) and "runs" in r}
    return "validation" if modes == {"validation"} else "test"


def grid_notes(records: list) -> list[str]:
    """A table note per composed grid: what a cell picked from it is covered by."""
    if picked_on(records) == "validation":
        how = "picked on the accuracy of a validation share held out of the private set (no guarantee for it)"
        covers = "covers the pick for the examples the heads train on"
    else:
        how, covers = "picked on test accuracy (the paper's practice; optimistic)", "covers the pick"
    return [
        f"a cell is the best of a grid of DP runs on the same private features, {how}: "
        f"one run is epsilon {g['single_run_epsilon']:.3g}, the grid's {g['runs']} runs compose to epsilon "
        f"{g['composed_epsilon']:.3g} at delta {g['delta']:.3g} ({g['accountant']}), which {covers}"
        for g in grid_compositions(records)
    ]
