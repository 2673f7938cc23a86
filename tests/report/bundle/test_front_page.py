"""The claims overview and the first page (report and bundle README): every paper's claims
in order, the verdict counts, the coverage summary; text that reStructuredText would read
as markup is escaped."""

from __future__ import annotations

import pandas as pd

from dpvip.report.claims.catalogue import overview_frame, overview_summary, overview_table, verdict_counts
from dpvip.report.bundle.coverage import ITEMS
from dpvip.report.claims.coverage import coverage_summary
from dpvip.report.bundle.front_page import bundle_readme, report_front


def claims(*verdicts: str) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "claim": f"({chr(97 + k)}) claim *{k}* with vip_micro_",
                "source": "Table 1",
                "verdict": verdict,
                "ours: statistic [95% CI]": "+1.00 [+0.50, +1.50]" if verdict != "not tested" else "",
                "runs per group": "3 / 3",
                "why": "",
            }
            for k, verdict in enumerate(verdicts)
        ]
    )


TABLES = {"DP-RandP": claims("held", "inconclusive"), "ViP": claims("not held", "not tested", "held")}


def test_the_overview_lists_the_papers_in_order_and_counts_the_verdicts():
    frame = overview_frame(TABLES)
    assert list(frame["paper"]) == ["ViP", "ViP", "ViP", "DP-RandP", "DP-RandP"]
    assert verdict_counts(frame) == {"held": 2, "not held": 1, "inconclusive": 1, "not tested": 1} | dict.fromkeys(
        ("equivalent", "unstable", "mixed", "uninformative", "not shown equivalent"), 0
    )
    assert overview_summary(frame) == "5 claims of the three papers: 2 held, 1 not held, 1 inconclusive, 1 not tested."
    _, title, notes = overview_table(TABLES, "embedded")
    assert "claims" in title and notes[1] == overview_summary(frame)


def test_the_bundle_readme_opens_with_the_claims_then_the_coverage():
    readme = bundle_readme(overview_frame(TABLES), "embedded")
    claims_at, coverage_at, contents_at = (
        readme.index(h) for h in ("## The papers' claims", "## Coverage", "## Contents")
    )
    assert claims_at < coverage_at < contents_at
    assert "| ViP | (a) claim *0* with vip_micro_ | not held | +1.00 [+0.50, +1.50] |" in readme
    assert coverage_summary(ITEMS) in readme and "`embedded` scale" in readme


def test_the_report_front_page_escapes_markup():
    page = report_front("Intro {{ snakemake.config['scale'] }}.", overview_frame(TABLES))
    assert page.startswith("Intro {{ snakemake.config['scale'] }}.")  # the intro stays a template
    assert "{% raw %}" in page and page.rstrip().endswith("{% endraw %}")
    assert r"(a) claim \*0\* with vip\_micro\_" in page and "     - not held" in page
    assert "5 claims of the three papers" in page
