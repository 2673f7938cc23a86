"""The coverage table holds the list: every numbered table and figure of the three papers
exactly once, each mapped to an output the workflow writes (its plan's names and the bundle's
rules) or to the reason it has none; a planned output that lands, or a mapped output that is
renamed or removed, fails here."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from dpvip.plan.dprandp_rows import FIGURES as DPRANDP_FIGURES
from dpvip.plan.dprandp_rows import TABLES as DPRANDP_TABLES
from dpvip.plan.transfer import MEHTA_FIGURES, MEHTA_HYPERPARAMETER_TABLES, MEHTA_TABLES, PROBE_TABLES
from dpvip.plan.vip_rows import VIP_TABLES
from dpvip.plan.vip_runs import expand_runs, figure_runs, synthetic_variants
from dpvip.report.bundle.coverage import ITEMS
from dpvip.report.claims.coverage import (
    coverage_counts,
    coverage_frame,
    coverage_summary,
    coverage_table,
    output_path,
)
from dpvip.report.claims.coverage_item import PAPERS, STATUSES, TITLE, Item
from dpvip.report.common.tables import write_table

ROOT = Path(__file__).resolve().parents[3]
BUNDLE = (ROOT / "rules" / "bundle.smk").read_text()
COMMON = (ROOT / "rules" / "common.smk").read_text()
PREFIXES = {"vip": "ViP", "mehta": "Mehta et al.", "dprandp": "DP-RandP"}
NUMBERED = re.compile(r"(vip|mehta|dprandp)_(table|figure)(\d+)([a-z]?)")


def _numbers(tables: int, figures: list[str]) -> list[str]:
    return [f"Table {n}" for n in range(1, tables + 1)] + [f"Figure {f}" for f in figures]


EXPECTED = {
    "ViP": _numbers(11, ["1", "2", "3a", "3b", "4a", "4b", "5", "6", "7"]),
    "Mehta et al.": _numbers(11, ["1a", "1b", "2a", "2b", "2c", "3", "4"]),
    "DP-RandP": _numbers(25, ["1", "2", "3a", "3b", "4", "5", "6", "7"]),
}


def dp_figures() -> set[str]:
    """DP_FIGURES of rules/common.smk: the loss figures of figure_runs() that have runs, here
    under the paper's config (the names are made in dpvip.plan.vip_runs, not in the rules)."""
    assert re.search(r"DP_FIGURES = \{.*?figure_runs\(DP, DP_RUNS", COMMON, re.S)
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    section, models = paper["dp_pretrain"], paper["pretrain"]["syn_vip"]["models"]
    runs = expand_runs(section, [*models, *synthetic_variants(section)], 233_000_000)
    return {name for name, members in figure_runs(section, runs, 233_000_000).items() if members}


def written() -> tuple[set[str], set[str]]:
    """(table stems, figure stems) the bundle's rules write: its fixed names, and its loops over
    the plan's constants."""
    for loop in (
        "for table in VIP_TABLES",
        "for t in DPRANDP_TABLES",
        "if t in MEHTA_TABLES",
        "for t in PROBE_OUTPUTS",
        "for figure in DP_FIGURES",
        "for f in DPRANDP_FIGURES",
        "if f in MEHTA_FIGURES",
        "for name in mehta_appendix_tables()",
    ):
        assert loop in BUNDLE, f"rules/bundle.smk no longer has '{loop}': update this test's names"
    tables = set(re.findall(r'table_files\("(\w+)"\)', BUNDLE))
    figures = set(re.findall(r'figure_files\("(\w+)"\)', BUNDLE))
    tables |= {*VIP_TABLES, *(f"dprandp_{t}" for t in (*DPRANDP_TABLES, *PROBE_TABLES))}
    tables |= {f"mehta_{t}" for t in (*MEHTA_TABLES, *MEHTA_HYPERPARAMETER_TABLES, "table10")}
    figures |= {*dp_figures(), *(f"dprandp_{f}" for f in DPRANDP_FIGURES), *(f"mehta_{f}" for f in MEHTA_FIGURES)}
    return tables, figures


TABLES, FIGURES = written()


def test_the_written_outputs_are_found():
    # Guards the guard: a regex that finds nothing would let every mapping below pass.
    assert {"vip_table3", "vip_dp_runs", "dprandp_claims", "privacy_audit"} <= TABLES
    assert {"vip_figure1", "vip_figure6", "synthetic_samples"} <= FIGURES
    assert {"vip_figure3a", "vip_figure3b", "vip_figure4a", "vip_figure4b", "vip_figure7"} <= FIGURES
    assert {"dprandp_table4", "dprandp_table23", "mehta_table5", "mehta_figure1b"} <= TABLES | FIGURES


def test_every_numbered_table_and_figure_is_listed_exactly_once():
    listed = Counter((item.paper, f"{item.kind} {item.number}") for item in ITEMS)
    assert [key for key, n in listed.items() if n > 1] == []
    for paper in PAPERS:
        assert sorted(label for p, label in listed if p == paper) == sorted(EXPECTED[paper]), paper
    assert len(ITEMS) == sum(map(len, EXPECTED.values())) == 71


def test_every_item_short_of_produced_says_why():
    for item in ITEMS:
        assert item.status in STATUSES and 0 < len(item.caption) <= 80, item.label
        if item.status != "produced":
            assert item.reason.strip(), f"{item.label} is {item.status} without a reason"
        if item.status == "planned":
            assert item.reason.startswith("planned"), item.label
    with pytest.raises(ValueError, match="needs a reason"):
        Item("ViP", "Table", "1", "linear probing", "absent")
    with pytest.raises(ValueError, match="names its output"):
        Item("ViP", "Table", "1", "linear probing", "partly produced", (), "a row is missing")
    with pytest.raises(ValueError, match="unknown"):
        Item("ViP", "Table", "1", "linear probing", "done", ("vip_table1",))


def test_mapped_outputs_are_outputs_the_workflow_writes():
    for item in ITEMS:
        if item.status not in ("produced", "partly produced"):
            continue
        for stem in item.outputs:
            assert stem in TABLES | FIGURES, f"{item.label} maps {stem}, which no rule writes"
            folder = "tables" if stem in TABLES else "figures"
            assert output_path(stem) == f"results/{folder}/{stem}", stem


def test_planned_outputs_are_not_written_yet_and_name_their_item():
    planned = [item for item in ITEMS if item.status == "planned"]  # none left today: the check waits for the next
    for item in planned:
        for stem in item.outputs:
            assert stem not in TABLES | FIGURES, f"{stem} is written now: make {item.label} produced"
            prefix, kind, number, panel = NUMBERED.fullmatch(stem).groups()
            assert (PREFIXES[prefix], kind.capitalize(), number + panel) == (item.paper, item.kind, item.number)


def test_every_numbered_output_is_mapped_by_its_item():
    # An output named after a paper's item (e.g. dprandp_figure6) must be listed on that item
    # (on each of its panels where the paper labels them, e.g. mehta_figure2 on 2a, 2b, 2c).
    by_label = {(item.paper, item.kind, item.number): item for item in ITEMS}
    for stem in sorted(TABLES | FIGURES):
        match = NUMBERED.fullmatch(stem)
        if not match:
            continue
        prefix, kind, number, panel = match.groups()
        paper, kind = PREFIXES[prefix], kind.capitalize()
        items = [
            item
            for (p, k, n), item in by_label.items()
            if p == paper and k == kind and (n == number + panel or (not panel and re.fullmatch(rf"{number}[a-z]", n)))
        ]
        assert items, f"{stem} names no item of {paper}"
        for item in items:
            assert stem in item.outputs, f"{item.label} does not map {stem}, which the workflow writes"


def test_counts_add_up():
    counts = coverage_counts(ITEMS)
    assert set(counts) == {*PAPERS, "total"}
    for paper in PAPERS:
        assert sum(counts[paper].values()) == len(EXPECTED[paper])
    assert counts["total"] == {s: sum(counts[p][s] for p in PAPERS) for s in STATUSES}
    assert counts["total"] == dict(Counter(item.status for item in ITEMS)) | {
        s: 0 for s in STATUSES if s not in {item.status for item in ITEMS}
    }
    summary = coverage_summary(ITEMS)
    assert summary.startswith(f"{len(ITEMS)} numbered tables and figures: {counts['total']['produced']} produced")


def test_counts_of_a_known_list():
    items = (
        Item("ViP", "Table", "1", "a", "produced", ("vip_table1",)),
        Item("ViP", "Figure", "2", "b", "absent", (), "a diagram"),
        Item("DP-RandP", "Table", "8", "c", "planned", ("dprandp_table8",), "planned: run times"),
        Item("DP-RandP", "Table", "7", "d", "partly produced", ("dprandp_table1",), "one row"),
    )
    assert coverage_counts(items) == {
        "ViP": {"produced": 1, "partly produced": 0, "planned": 0, "absent": 1},
        "DP-RandP": {"produced": 0, "partly produced": 1, "planned": 1, "absent": 0},
        "total": {"produced": 1, "partly produced": 1, "planned": 1, "absent": 1},
    }
    assert coverage_summary(items) == (
        "4 numbered tables and figures: 1 produced, 1 partly, 1 planned, 1 absent "
        "(ViP 2: 1 produced, 1 absent; DP-RandP 2: 1 partly, 1 planned; reasons in results/tables/coverage)."
    )


def test_the_table_has_one_row_per_item(tmp_path):
    frame, title, notes = coverage_table(ITEMS)
    assert title == TITLE and len(frame) == len(ITEMS) and frame.equals(coverage_frame(ITEMS))
    assert list(frame.columns) == ["paper", "item", "what it shows", "status", "our output(s)", "reason"]
    assert not frame.duplicated(["paper", "item"]).any()
    row = frame[(frame["paper"] == "Mehta et al.") & (frame["item"] == "Figure 2b")].iloc[0]
    assert row["our output(s)"] == "results/figures/mehta_figure2" and row["status"] == "produced"
    row = frame[(frame["paper"] == "DP-RandP") & (frame["item"] == "Table 7")].iloc[0]
    assert row["our output(s)"] == "results/tables/dprandp_table1, results/tables/mehta_table5"
    assert (frame.loc[frame["status"] == "absent", "our output(s)"] == "").all()
    assert notes[0] == coverage_summary(ITEMS) and any("stand-in" in note for note in notes)
    write_table(frame, tmp_path / "coverage.csv", title, notes)
    assert f"# {TITLE}" in (tmp_path / "coverage.md").read_text()
    assert len((tmp_path / "coverage.csv").read_text().splitlines()) == len(ITEMS) + 1


def test_the_module_is_torch_free():
    code = "import sys, dpvip.report.claims.coverage; print(sorted({'torch', 'matplotlib'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
