"""The papers' qualitative claims beside our verdicts: one table per paper
(`vip_claims`, `mehta_claims`, `dprandp_claims`) and the overview across the three
(`claims`), which the report's first page and the bundle's README show.

A `Claim` is a statement a reader of the abstract, introduction or conclusions would quote,
where it comes from in the paper, the paper's own numbers for it, what we measured, and our
`Verdict` (`dpvip.report.verdicts`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dpvip.report.coverage import PAPERS
from dpvip.report.verdicts import CONFIDENCE, RESAMPLES, VERDICTS, Group, Verdict, judge, not_tested


@dataclass(frozen=True)
class Claim:
    key: str  # "a", "b", ...: stable across runs
    statement: str
    source: str  # "Table 1", "Figure 4a", "Sec. 4.3"
    paper_evidence: str
    measured: str
    verdict: Verdict


def difference(means):
    """The statistic of "better beats worse"."""
    return means["better"] - means["worse"]


class Catalogue:
    """A paper's claims, {key: (statement, where in the paper, the paper's numbers)}, judged
    on our groups or marked not tested."""

    def __init__(self, claims: dict[str, tuple[str, str, str]]):
        self.claims = claims

    def judged(self, key: str, groups: dict[str, Group], measured: str, statistic=difference) -> Claim:
        return Claim(key, *self.claims[key], measured, judge(groups, statistic))

    def untested(self, key: str, reason: str) -> Claim:
        return Claim(key, *self.claims[key], "—", not_tested(reason))


def claims_frame(claims: list[Claim]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "claim": f"({claim.key}) {claim.statement}",
                "source": claim.source,
                "verdict": claim.verdict.verdict,
                "ours: statistic [95% CI]": claim.verdict.interval,
                "seeds per group": claim.verdict.seeds,
                "measured": claim.measured,
                "why not tested": claim.verdict.reason,
                "paper's evidence": claim.paper_evidence,
            }
            for claim in claims
        ]
    )


TEST_NOTE = (
    f"Verdicts: 'held' when the {CONFIDENCE:.0%} interval of the claim's statistic (positive when the claim "
    f"holds) lies above 0, 'not held' when below, 'inconclusive' when it contains 0; from a two-level bootstrap "
    f"({RESAMPLES:,} resamples): seeds drawn with replacement, each accuracy redrawn as a binomial proportion "
    "of its test set. With one seed per group the interval carries test-set noise only, not training noise. "
    "'not tested': our runs cannot speak to the claim (the reason is given)."
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
                    "seeds per group": row["seeds per group"],
                }
            )
    return pd.DataFrame(rows)


def verdict_counts(frame: pd.DataFrame) -> dict[str, int]:
    counts = frame["verdict"].value_counts()
    return {verdict: int(counts.get(verdict, 0)) for verdict in VERDICTS}


def overview_summary(frame: pd.DataFrame) -> str:
    counts = verdict_counts(frame)
    parts = ", ".join(f"{count} {verdict}" for verdict, count in counts.items())
    return f"{len(frame)} claims of the three papers: {parts}."


def overview_table(tables: dict[str, pd.DataFrame], scale: str) -> tuple[pd.DataFrame, str, list[str]]:
    frame = overview_frame(tables)
    notes = [
        f"Scale: {scale}. Each paper's table (vip_claims, mehta_claims, dprandp_claims) gives what we measured "
        "and the paper's own numbers.",
        overview_summary(frame),
        TEST_NOTE,
    ]
    return frame, "The papers' claims and our verdicts", notes
