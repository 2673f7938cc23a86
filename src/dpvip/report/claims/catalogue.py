"""The papers' qualitative claims beside our verdicts: one table per paper
(`vip_claims`, `mehta_claims`, `dprandp_claims`) and the overview across the three
(`claims`), which the report's first page and the bundle's README show.

A `Claim` is a comparative finding of a paper (abstract, main results, ablations, appendix
tables, figure captions), where it comes from in the paper, the paper's own numbers for it (and
its effect size, in the units of our statistic), what we measured, and our `Verdict`
(`dpvip.report.claims.verdicts`). The catalogues (statement, source, evidence, effect) are data:
config/paper_values/claims/<paper>.yaml, one entry per stable key; each paper's module judges
every key or says why it is not tested. Keys sort by length, then alphabetically (a ... z, aa ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from dpvip.errors import DpvipInputError

from dpvip.per_example import PER_EXAMPLE
from dpvip.report.claims.contrasts import paired_runs
from dpvip.report.claims.coverage import PAPERS
from dpvip.report.common.transfer_cells import study_cells
from dpvip.report.claims.verdicts import (
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
    judge_equivalence,
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
# The catalogues: the dpvip folder's config/paper_values/claims/<paper>.yaml (the library runs
# from the checkout's src/, as the workflow requires)
CATALOGUES = Path(__file__).resolve().parents[4] / "config" / "paper_values" / "claims"
FIELDS = ("statement", "source", "evidence", "effect")
# A claim of no difference also states its equivalence margin (points): how far apart two arms
# may be and still count as "the same" (`dpvip.report.claims.verdicts.judge_equivalence`).
MARGIN = "margin"


def key_order(key: str) -> tuple[int, str]:
    """a, b, ..., z, aa, ab, ...: shorter keys first."""
    return len(key), key


def ordered(claims: list[Claim]) -> list[Claim]:
    return sorted(claims, key=lambda claim: key_order(claim.key))


def load_catalogue(paper: str, folder: Path = CATALOGUES, with_margins: bool = False):
    """{key: (statement, source, evidence, effect)} of `paper` (vip, mehta, dprandp), checked;
    `with_margins`: also {key: equivalence margin} of its claims of no difference."""
    path = Path(folder) / f"{paper}.yaml"
    entries = yaml.safe_load(path.read_text())
    if not isinstance(entries, dict) or not entries:
        raise DpvipInputError(f"{path}: expected a mapping of claim keys")
    claims, margins = {}, {}
    for key, entry in entries.items():
        if not (isinstance(key, str) and key.isalpha() and key.islower()):
            raise DpvipInputError(f"{path}: claim key {key!r} must be lower-case letters")
        if not isinstance(entry, dict) or set(entry) - {MARGIN} != set(FIELDS):
            raise DpvipInputError(f"{path}: claim {key} needs exactly {', '.join(FIELDS)} (and, optionally, {MARGIN})")
        margin = entry.get(MARGIN)
        if margin is not None and (not isinstance(margin, (int, float)) or isinstance(margin, bool) or margin <= 0):
            raise DpvipInputError(f"{path}: claim {key}'s margin must be a positive number of points")
        if not all(isinstance(entry[f], str) and entry[f].strip() for f in FIELDS[:3]):
            raise DpvipInputError(f"{path}: claim {key} has an empty statement, source or evidence")
        effect = entry["effect"]
        if effect is not None and not isinstance(effect, (int, float)):
            raise DpvipInputError(f"{path}: claim {key}'s effect must be a number or null")
        claims[key] = (
            entry["statement"],
            entry["source"],
            entry["evidence"],
            None if effect is None else float(effect),
        )
        if margin is not None:
            margins[key] = float(margin)
    ordered_claims = dict(sorted(claims.items(), key=lambda item: key_order(item[0])))
    return (ordered_claims, margins) if with_margins else ordered_claims


class Catalogue:
    """A paper's claims, {key: (statement, where in the paper, the paper's numbers, the
    paper's effect)}, judged on our groups or marked not tested."""

    def __init__(self, claims: dict[str, tuple[str, str, str, float | None]], margins: dict[str, float] | None = None):
        self.claims, self.margins = claims, margins or {}

    @classmethod
    def of(cls, paper: str) -> Catalogue:
        return cls(*load_catalogue(paper, with_margins=True))

    def keys(self) -> list[str]:
        return list(self.claims)

    def effect(self, key: str) -> float | None:
        return self.claims[key][3]

    def judged(self, key: str, groups: dict[str, Group], measured: str, contrasts=DIFFERENCE) -> Claim:
        return self.claim(key, measured, judge(groups, contrasts, self.effect(key)))

    def equivalent(self, key: str, groups: dict[str, Group], measured: str, contrast=DIFFERENCE) -> Claim:
        """A claim of no difference: equivalence within its catalogue margin (TOST)."""
        if key not in self.margins:
            raise DpvipInputError(f"claim {key} is judged as equivalence but its catalogue entry states no margin")
        return self.claim(key, measured, judge_equivalence(groups, contrast, self.margins[key]))

    def claim(self, key: str, measured: str, verdict: Verdict) -> Claim:
        return Claim(key, *self.claims[key], measured, verdict)

    def untested(self, key: str, reason: str) -> Claim:
        return self.claim(key, "—", not_tested(reason))


class StudyGroups:
    """Groups of DP transfer studies' cells ({study: {(row, column): Cell}}): one accuracy per
    seed at the cell's chosen learning rate, with the study's test-set size and chance."""

    def __init__(self, studies: dict[str, dict]):
        self.cells = {name: study_cells(result) for name, result in studies.items()}
        self.tests = {
            name: min((f.get("test") for f in result.get("features", {}).values() if f.get("test")), default=None)
            for name, result in studies.items()
        }
        self.chances = {name: _study_chance(result) for name, result in studies.items()}

    def group(self, study: str, row: str, column: str) -> Group:
        cell = self.cells.get(study, {}).get((row, column))
        if cell is None:
            return Group(())
        values = [run["result"]["accuracy"] for run in cell.runs]
        records = [run["result"].get(PER_EXAMPLE) for run in cell.runs]
        label = f"{row} / {column}"  # how reasons name it
        return Group.of(values, self.tests.get(study), self.chances.get(study), label=label, **paired_runs(records))

    def rows(self, study: str) -> list[str]:
        return sorted({row for row, _ in self.cells.get(study, {})})

    def columns(self, study: str, row: str) -> list[str]:
        return [column for r, column in self.cells.get(study, {}) if r == row]


def _study_chance(result: dict) -> float | None:
    """Chance accuracy (%) of a study's task, from the class count its features record."""
    classes = [f.get("classes") for f in result.get("features", {}).values() if f.get("classes")]
    return 100.0 / classes[0] if classes else None


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
    "t-interval on the run means (independent runs: seeds with fresh keys) with the test set's variance added: "
    "from the per-example differences when the arms were scored on the same test images (paired: the images' "
    "difficulty cancels), else each arm's binomial variance. A decisive verdict needs "
    f"{MIN_RUNS} runs per group: with fewer the claim is 'inconclusive' with the number of runs (one accuracy run "
    f"is given the run-to-run SD of our DP-RandP runs, {REFERENCE_RUN_SD} points, for its interval). 'unstable': "
    "a decisive verdict that changes when one run is left out. 'uninformative': an arm, on either side of the "
    "claim, sits within two standard errors of chance or of 100% (an arm that failed to learn shows nothing "
    "either way), unless the claim is that the arm falls to chance. 'mixed': the claim's settings disagree, one "
    "held and another not held. Claims of no difference are tested for equivalence within a stated margin "
    "(two one-sided tests): 'equivalent' when the 90% interval lies inside it, 'not held' when the 95% interval "
    "lies wholly outside, 'not shown equivalent' otherwise. 'not tested': our runs cannot speak to the claim "
    "(the reason is given). A claim of several contrasts (one arm beats each of the others) is held when every "
    "contrast's interval lies above 0, and shows the one reaching lowest; it is not held only when one "
    "contrast's interval, Bonferroni-corrected over the contrasts (97.5% for two), lies below 0."
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
