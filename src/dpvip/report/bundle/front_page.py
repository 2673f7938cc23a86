"""The first thing a reader sees: the claims overview and the coverage counts, on the
report's opening page and in the bundle's README.md, before the DAG and the tables."""

from __future__ import annotations

import pandas as pd

from dpvip.report.claims.catalogue import overview_summary
from dpvip.report.bundle.coverage import ITEMS
from dpvip.report.claims.coverage import coverage_counts, coverage_summary

README = "README.md"


def _claim_rows(claims: pd.DataFrame) -> list[tuple[str, str, str, str]]:
    return [
        (row["paper"], row["claim"], row["verdict"], row["ours: statistic [95% CI]"] or "")
        for _, row in claims.iterrows()
    ]


def _coverage_rows() -> list[tuple[str, ...]]:
    return [(paper, *(str(n) for n in counts.values())) for paper, counts in coverage_counts(ITEMS).items()]


def bundle_readme(claims: pd.DataFrame, scale: str) -> str:
    """results/bundle/README.md: claims and coverage first, then what the bundle holds."""
    statuses = list(next(iter(coverage_counts(ITEMS).values())))
    lines = [
        "# dpvip results bundle",
        "",
        f"The three papers (ViP, Mehta et al., DP-RandP) regenerated at the `{scale}` scale, each number beside "
        "the paper's. Check every file against its hash with `dpvip bundle verify <this folder>`.",
        "",
        "## The papers' claims and our verdicts",
        "",
        overview_summary(claims) + " Each paper's table (`tables/<paper>_claims.md`) has the measurements, the "
        "paper's numbers and how the verdict is reached.",
        "",
        "| paper | claim | verdict | ours: statistic [95% CI] |",
        "|---|---|---|---|",
        *(f"| {' | '.join(cell.replace('|', '/') for cell in row)} |" for row in _claim_rows(claims)),
        "",
        "## Coverage of the papers' numbered tables and figures",
        "",
        coverage_summary(ITEMS),
        "",
        f"| paper | {' | '.join(statuses)} |",
        f"|---|{'---|' * len(statuses)}",
        *(f"| {' | '.join(row)} |" for row in _coverage_rows()),
        "",
        "## Contents",
        "",
        "- `tables/`: every table as CSV (full precision), Markdown and LaTeX, with its notes;",
        "- `figures/`: every figure as PNG and PDF;",
        "- `report/report.html`: the Snakemake report (the same tables and figures, the DAG, run times);",
        "- `PRIVACY.md`, `privacy.json`: what each file reveals of the private data, and under which guarantee;",
        "- `provenance.json`: configuration, code version, packages, hardware, job times;",
        "- `MANIFEST.sha256`: the hash of every file.",
        "",
    ]
    return "\n".join(lines)


def _rst(text: str) -> str:
    """Text as itself in reStructuredText (no emphasis, references or substitutions)."""
    for character in "\\*`|_":
        text = text.replace(character, "\\" + character)
    return text


def report_front(intro: str, claims: pd.DataFrame) -> str:
    """The report's opening page (reStructuredText): `intro`, then the claims and coverage."""
    body = [
        intro.rstrip(),
        "",
        "{% raw %}",  # the page is a Jinja template: our text is not
        "",
        "**The papers' claims.** " + _rst(overview_summary(claims)),
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - paper",
        "     - claim",
        "     - verdict",
        "     - ours: statistic [95% CI]",
    ]
    for row in _claim_rows(claims):
        body += [f"   * - {_rst(row[0])}", *(f"     - {_rst(cell) or '-'}" for cell in row[1:])]
    body += ["", "**Coverage.** " + _rst(coverage_summary(ITEMS)), "", "{% endraw %}", ""]
    return "\n".join(body)
