"""What this workflow reproduces of the three papers: every numbered table and figure of ViP,
Mehta et al. and DP-RandP, mapped to our output, or to the reason it has none.

One `Item` per numbered table or figure (a figure's labelled panels are items of their own
where the paper labels them, as Mehta et al.'s 1a and 1b, or where we draw them apart, as
ViP's 4a and 4b). Its status says how much of it a rule of this workflow writes:

- produced: an output of ours reproduces all of it (at the embedded scale with stand-ins): every
  printed column, and every row of the paper's own runs, has ours beside the paper's value;
- partly produced: an output of ours has some of it; the reason says what is missing
  (tests/report/bundle/test_coverage_filled.py builds the tables to hold this against their cells);
- planned: not produced yet, the output stem it will have is given;
- absent: no output; the reason says why (no data, no result to reproduce, ...).

The list is held by tests/report/bundle/test_coverage.py, which checks it against the outputs the
workflow's plan names: a mapped output that is renamed or removed, or a planned output that
lands, fails it. Torch-free (pandas only), like every table builder here.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from dpvip.report.claims.coverage_item import FIGURE_STEMS, PAPERS, STATUSES, TITLE, UNNUMBERED, Item


def output_path(stem: str) -> str:
    """'vip_table1' -> 'results/tables/vip_table1' (without the suffixes: .csv/.md/.tex or .png/.pdf)."""
    folder = "figures" if stem in FIGURE_STEMS or "_figure" in stem else "tables"
    return f"results/{folder}/{stem}"


def coverage_frame(items: tuple[Item, ...]) -> pd.DataFrame:
    """One row per item, in the papers' order."""
    return pd.DataFrame(
        [
            {
                "paper": item.paper,
                "item": f"{item.kind} {item.number}",
                "what it shows": item.caption,
                "status": item.status,
                "our output(s)": ", ".join(output_path(stem) for stem in item.outputs),
                "reason": item.reason,
            }
            for item in items
        ],
        columns=["paper", "item", "what it shows", "status", "our output(s)", "reason"],
    )


def coverage_counts(items: tuple[Item, ...]) -> dict[str, dict[str, int]]:
    """{paper: {status: count}} for each paper with items, and "total" over all of them."""
    counts = {}
    for paper in PAPERS:
        of_paper = Counter(item.status for item in items if item.paper == paper)
        if of_paper:
            counts[paper] = {status: of_paper[status] for status in STATUSES}
    everything = Counter(item.status for item in items)
    counts["total"] = {status: everything[status] for status in STATUSES}
    return counts


def _tally(counts: dict[str, int]) -> str:
    short = {"partly produced": "partly"}
    return ", ".join(f"{n} {short.get(status, status)}" for status, n in counts.items() if n)


def coverage_summary(items: tuple[Item, ...]) -> str:
    """One paragraph: the totals, then per paper."""
    counts = coverage_counts(items)
    total = counts.pop("total")
    papers = "; ".join(f"{paper} {sum(c.values())}: {_tally(c)}" for paper, c in counts.items())
    return (
        f"{sum(total.values())} numbered tables and figures: {_tally(total)} "
        f"({papers}; reasons in results/tables/coverage)."
    )


def coverage_table(items: tuple[Item, ...]) -> tuple[pd.DataFrame, str, list[str]]:
    """(frame, title, notes), as every table builder of dpvip.report returns them."""
    notes = [
        coverage_summary(items),
        "produced: an output of this workflow reproduces all of the item, ours beside every printed column and "
        "every row of the paper's own runs; partly produced: an output has part of it (the reason says which "
        "part is missing, e.g. the ε columns the embedded config does not run); planned: not produced yet, "
        "under the output name given; absent: no output, for the reason given.",
        "Outputs are stems: results/tables/<stem>.{csv,md,tex}, results/figures/<stem>.{png,pdf}. "
        "Produced means the shipped configs' rules write it: at the embedded scale (config/config.yaml) the "
        "data are stand-ins (scikit-learn's digits, generated shapes, crops of sample photographs) and the "
        "models CPU-sized, so only the comparisons carry over; config/paper.yaml runs the papers' scale.",
        "Rows of other works a paper quotes (TAN, DP-NFNet, Tramèr and Boneh, ...) keep the paper's value "
        "in our tables and do not make an item partly produced; rows of a paper's own runs that we do not "
        "run do.",
        f"Our outputs that no numbered item shows: {', '.join(UNNUMBERED)}.",
    ]
    return coverage_frame(items), TITLE, notes
