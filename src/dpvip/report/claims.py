"""The papers' qualitative claims beside our verdicts: one table per paper
(`vip_claims`, `mehta_claims`, `dprandp_claims`) and the overview across the three
(`claims`), which the report's first page and the bundle's README show.

A `Claim` is a statement a reader of the abstract, introduction or conclusions would quote,
where it comes from in the paper, the paper's own numbers for it (and its effect size, in the
units of our statistic), what we measured, and our `Verdict` (`dpvip.report.verdicts`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dpvip.report.coverage import PAPERS
from dpvip.report.verdicts import (
    CONFIDENCE,
    DECISIVE,
    MIN_RUNS,
    NOT_TESTED,
    POWER,
    REFERENCE_RUN_SD,
    VERDICTS,
    Group,
    Verdict,
    judge,
    not_tested,
)


@dataclass(frozen=True)
class Claim:
    key: str  # "a", "b", ...: stable across runs
    statement: str
    source: str  # "Table 1", "Figure 4a", "Sec. 4.3"
    paper_evidence: str
    paper_effect: float | None  # the paper's value of the claim's statistic (None: no single number)
    measured: str
    verdict: Verdict


DIFFERENCE = {"better": 1.0, "worse": -1.0}  # the contrast of "better beats worse"


class Catalogue:
    """A paper's claims, {key: (statement, where in the paper, the paper's numbers, the
    paper's effect)}, judged on our groups or marked not tested."""

    def __init__(self, claims: dict[str, tuple[str, str, str, float | None]]):
        self.claims = claims

    def judged(self, key: str, groups: dict[str, Group], measured: str, contrasts=DIFFERENCE) -> Claim:
        return self.claim(key, measured, judge(groups, contrasts, self.claims[key][3]))

    def claim(self, key: str, measured: str, verdict: Verdict) -> Claim:
        return Claim(key, *self.claims[key], measured, verdict)

    def untested(self, key: str, reason: str) -> Claim:
        return self.claim(key, "—", not_tested(reason))


def _number(value: float) -> str:
    return "" if value is None or value != value else f"{value:.2f}"


def claims_frame(claims: list[Claim]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "claim": f"({claim.key}) {claim.statement}",
                "source": claim.source,
                "verdict": claim.verdict.verdict,
                "ours: statistic [95% CI]": claim.verdict.interval,
                "runs per group": claim.verdict.runs,
                "measured": claim.measured,
                "why": claim.verdict.reason,
                "minimum detectable effect": _number(claim.verdict.detectable),
                "paper's effect": _number(claim.paper_effect),
                f"runs per group for the paper's effect ({POWER:.0%} power)": claim.verdict.runs_needed,
                "paper's evidence": claim.paper_evidence,
            }
            for claim in claims
        ]
    )


TEST_NOTE = (
    f"Verdicts: 'held' when the {CONFIDENCE:.0%} interval of the claim's statistic (positive when the claim "
    "holds) lies above 0, 'not held' when below, 'inconclusive' when it contains 0. The interval is a Welch "
    "t-interval on the run means (independent runs: seeds with fresh keys) with each test set's binomial "
    f"variance added. A decisive verdict needs {MIN_RUNS} runs per group: with fewer the claim is "
    "'inconclusive' with the number of runs (one accuracy run is given the run-to-run SD of our DP-RandP runs, "
    f"{REFERENCE_RUN_SD} points, for its interval). 'unstable': a decisive verdict that changes when one run "
    "is left out. 'uninformative': an arm sits within two standard errors of chance or of 100%. 'mixed': the "
    "claim's settings point opposite ways. 'not tested': our runs cannot speak to the claim (the reason is given)."
)
POWER_NOTE = (
    f"Power: the minimum detectable effect is the smallest effect found with {POWER:.0%} power at a two-sided "
    f"{1 - CONFIDENCE:.0%} level with these runs and test sets; the runs column is how many runs per group would "
    "detect the paper's own effect (its numbers at paper scale, in points) at our noise and test-set size."
)


def overview_frame(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """{paper: its claims frame} -> one row per claim, the papers in order."""
    rows = []
    for paper in PAPERS:
        if paper not in tables:
            continue
        for _, row in tables[paper].iterrows():
            rows.append(
                {
                    "paper": paper,
                    "claim": row["claim"],
                    "source": row["source"],
                    "verdict": row["verdict"],
                    "ours: statistic [95% CI]": row["ours: statistic [95% CI]"],
                    "runs per group": row["runs per group"],
                    "why": row["why"],
                }
            )
    return pd.DataFrame(rows)


def verdict_counts(frame: pd.DataFrame) -> dict[str, int]:
    counts = frame["verdict"].value_counts()
    return {verdict: int(counts.get(verdict, 0)) for verdict in VERDICTS}


def overview_summary(frame: pd.DataFrame) -> str:
    counts = verdict_counts(frame)
    parts = ", ".join(f"{count} {verdict}" for verdict, count in counts.items() if count)
    return f"{len(frame)} claims of the three papers: {parts}."


def multiplicity_note(frame: pd.DataFrame) -> str:
    tested = int((frame["verdict"] != NOT_TESTED).sum())
    decisive = int(frame["verdict"].isin(DECISIVE).sum())
    return (
        f"Multiplicity: {tested} claims are tested, each at {1 - CONFIDENCE:.0%}; even if every one of them were "
        f"false, about {tested * (1 - CONFIDENCE) / 2:.1f} would be called held by chance alone "
        "(and as many not held). "
        f"{decisive} verdicts here are decisive."
    )


def overview_table(tables: dict[str, pd.DataFrame], scale: str) -> tuple[pd.DataFrame, str, list[str]]:
    frame = overview_frame(tables)
    notes = [
        f"Scale: {scale}. Each paper's table (vip_claims, mehta_claims, dprandp_claims) gives what we measured, "
        "the power of each test and the paper's own numbers.",
        overview_summary(frame),
        TEST_NOTE,
        multiplicity_note(frame) if len(frame) else "",
    ]
    notes = [note for note in notes if note]
    return frame, "The papers' claims and our verdicts", notes
