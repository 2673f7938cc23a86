"""Coverage's "produced" holds against the tables themselves: a ViP or DP-RandP table that the
shipped embedded config leaves with a printed column empty of ours (every planned cell of ours
filled) must be "partly produced" in the coverage list, never "produced"."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml
from dprandp.test_tables import fake_result

from dpvip.plan.dprandp_rows import TABLES as DPRANDP_TABLES
from dpvip.plan.dprandp_rows import needs
from dpvip.plan.dprandp_runs import DPRandPPlan
from dpvip.plan.vip_evaluations import EvaluationPlan
from dpvip.plan.vip_rows import VIP_TABLES, Backbones, table_rows
from dpvip.plan.vip_runs import ablation_model, expand_runs, synthetic_variants
from dpvip.report.bundle.coverage import ITEMS
from dpvip.report.dprandp.tables import dprandp_table
from dpvip.report.common.paper_values import load_paper_values, paper_table
from dpvip.report.vip.tables import run_facts, vip_table

ROOT = Path(__file__).resolve().parents[3]
VALUES = load_paper_values(ROOT / "config" / "paper_values")
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
STATUS = {stem: item for item in ITEMS for stem in item.outputs[:1]}  # an item by its own output


def empty_paper_columns(frame: pd.DataFrame) -> list[str]:
    """The printed columns ('<c> (paper)') whose '(ours)' twin is missing or empty in every row."""
    empty = []
    for column in (c.removesuffix(" (paper)") for c in frame.columns if c.endswith(" (paper)")):
        ours = frame.get(f"{column} (ours)")
        if ours is None or all(v == "" or (isinstance(v, float) and math.isnan(v)) for v in ours):
            empty.append(column)
    return empty


def test_the_column_check_sees_an_empty_twin():
    frame = pd.DataFrame({"a (paper)": [1.0], "a (ours)": [math.nan], "b (paper)": [2.0], "b (ours)": [3.0]})
    assert empty_paper_columns(frame) == ["a"]


def embedded_vip() -> tuple[Backbones, EvaluationPlan]:
    dp, syn = CONFIG["dp_pretrain"], CONFIG["pretrain"]["syn_vip"]
    examples = CONFIG["data"][dp["dataset"]].get("images")
    runs = expand_runs(dp, [*syn["models"], *synthetic_variants(dp)], examples, CONFIG["privacy"])
    baselines = {row: base["arch"] for row, base in CONFIG["evaluate"]["few_shot"]["baselines"].items()}
    backbones = Backbones(syn["models"], runs, ablation_model(dp), baselines)
    return backbones, EvaluationPlan(CONFIG["evaluate"], backbones, CONFIG["privacy"])


@pytest.mark.parametrize("table", VIP_TABLES)
def test_a_vip_table_with_a_column_not_ours_is_not_produced(table):
    backbones, plan = embedded_vip()
    columns = list(paper_table(VALUES, "vip", table.removeprefix("vip_")).columns)
    rows = table_rows(table, columns, backbones)
    # Every cell the plan evaluates gets a value, and every run fact its value: what a complete run fills.
    ledger = {"examples": 2048, "sample_rate": 0.0625, "noise_multiplier": 1.0}
    mae = {b for row in rows for b, _ in row.cells.values() if not b.startswith("cnn_")}
    ours = run_facts(
        backbones.runs,
        {name: ledger for name in backbones.runs},
        {b: 1.0 for b in mae},
        {b: 2048 for b in mae if b.startswith("syn_vip_")},
    )
    for row in rows:
        for backbone, metric in row.cells.values():
            if plan.evaluation(backbone, metric) is not None:
                ours.setdefault(backbone, {})[metric] = 50.0
    empty = empty_paper_columns(vip_table(table, VALUES, rows, ours))
    if empty:
        assert STATUS[table].status != "produced", f"{table} leaves {empty} to the paper alone"


@pytest.mark.parametrize("table", DPRANDP_TABLES)
def test_a_dprandp_table_with_a_column_not_ours_is_not_produced(table):
    plan = DPRandPPlan(CONFIG["dprandp"], CONFIG["synthetic"]["datasets"])
    results = {run.path: fake_result(run, 50.0 + run.seed, validation=40.0) for run in needs(plan, table)}
    frame, _, _ = dprandp_table(table, plan, results, VALUES)
    empty = empty_paper_columns(frame)
    if empty:
        assert STATUS[f"dprandp_{table}"].status != "produced", f"dprandp_{table} leaves {empty} to the paper alone"


def test_the_items_the_review_found_are_partly_produced():
    # ViP Table 2 (1 of 9 few-shot columns ours) and DP-RandP Table 1 (2 of 7 epsilons).
    assert STATUS["vip_table2"].status == STATUS["dprandp_table1"].status == "partly produced"
