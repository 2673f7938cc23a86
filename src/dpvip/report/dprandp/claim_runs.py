"""The groups DP-RandP's claims compare: our private runs by (series, epsilon), one accuracy
per seed with its test set, chance level and per-example correctness (paired comparisons);
the claims catalogue (config/paper_values/claims/dprandp.yaml) and how a group reads in a
claim's "measured" column. Shared by `dpvip.report.dprandp.claims` and
`dpvip.report.dprandp.probe_claims`.
"""

from __future__ import annotations

import pandas as pd

from dpvip.per_example import PER_EXAMPLE
from dpvip.plan.dprandp_rows import COLD_ROW, WARM_FULL, WARM_NO_PHASE2, claim_runs
from dpvip.plan.dprandp_runs import MAIN_TASK, DPRandPPlan, epsilon_label
from dpvip.report.claims.catalogue import Catalogue
from dpvip.report.claims.contrasts import paired_runs
from dpvip.report.dprandp.tables import run_chances
from dpvip.report.claims.verdicts import Group

LINEAR_PROBING = "Phase II only"
CATALOGUE = Catalogue.of("dprandp")
EMA, LIVE = "accuracy", "accuracy_live"  # the result keys of the EMA model's and the live weights' accuracy


class ClaimRuns:
    """Groups of our accuracies: {(series, epsilon): runs}, each with its test-set size and
    chance level; `weights`: the EMA model's accuracies or the live weights'."""

    def __init__(self, plan: DPRandPPlan, results: dict[str, dict], weights: str = EMA):
        self.results, self.weights = results, weights
        self.runs = claim_runs(plan)

    def group(self, series: str, epsilon: float, metric: str = "test") -> Group:
        runs = self.runs.get(series, {}).get(epsilon, [])
        return self.of_runs(runs, f"{series} at epsilon {epsilon_label(epsilon)}", metric)

    def of_runs(self, runs, label: str, metric: str = "test") -> Group:
        """The group of `runs` (PrivateRun) that have results, named `label` in reasons."""
        found = [self.results[r.path] for r in runs if r.path in self.results]
        values = [result.get(self.weights, {}).get(metric) for result in found]
        sizes = [result.get("data", {}).get(metric) for result in found]
        records = [result.get(PER_EXAMPLE, {}).get(self.weights, {}).get(metric) for result in found]
        test = min((n for n in sizes if n), default=None)
        return Group.of(values, test, chance_of_runs(found), label=label, **paired_runs(records))

    def epsilons(self) -> list[float]:
        """The epsilons of Figure 2's series that have results (inf last)."""
        found = {e for s in (WARM_FULL, WARM_NO_PHASE2, LINEAR_PROBING, COLD_ROW) for e in self.runs.get(s, {})}
        return sorted(e for e in found if any(self.group(s, e).values for s in (WARM_FULL, COLD_ROW)))


def chance_of_runs(results: list[dict]) -> float | None:
    """Chance accuracy (%) of the data the runs were tested on (`run_chances`, the tables' own)."""
    found = run_chances(MAIN_TASK, "test", dict(enumerate(results)))
    return next(iter(found)).level if found else None


def fmt_group(group: Group) -> str:
    if not group.values:
        return "—"
    if len(group.values) == 1:
        return f"{group.mean:.2f} (1 run)"
    std = float(pd.Series(group.values).std())
    return f"{group.mean:.2f} ± {std:.2f} ({group.runs} runs)"
