"""Mehta et al.'s Table 10: the paper's throughputs in its order, ours from the private DP-LAMB
runs of a constructed Table 2 study (expected examples over the seconds x threads of their
steps), the ratios between models, and notes that say what compares and what does not."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import merged_config
from transfer_studies import DATA, STEP_SECONDS, THREADS, fake_study, head_steps

from dpvip.plan.transfer import TransferPlan
from dpvip.report.mehta.throughput import throughput_table
from dpvip.report.common.paper_values import load_paper_values, paper_table
from dpvip.report.common.tables import write_table

ROOT = Path(__file__).resolve().parents[3]
VALUES = load_paper_values(ROOT / "config" / "paper_values")
EMBEDDED = merged_config("config.yaml")["dp_transfer"]
PLAN = TransferPlan(EMBEDDED)
TRAIN = DATA["photos"][2]


def expected_per_core(model_row: str) -> float:
    """What a private DP-LAMB run of `model_row` processes per second per thread in the fake study:
    q n examples per step at STEP_SECONDS per step on THREADS threads, summed over its runs."""
    runs = [
        r
        for r in PLAN.runs("mehta_table2")
        if r.row == model_row and r.settings["optimizer"] == "lamb" and r.settings["epsilon"] is not None
    ]
    examples = sum(head_steps(r.settings) * r.settings["batch_fraction"] * TRAIN for r in runs)
    return examples / sum(head_steps(r.settings) * STEP_SECONDS * THREADS for r in runs)


def test_paper_rows_in_order_and_ours_measured_per_core(tmp_path):
    frame, title, notes = throughput_table(fake_study(PLAN, "mehta_table2"), VALUES, EMBEDDED, "embedded")
    paper = paper_table(VALUES, "mehta", "table10")
    assert list(frame["Model"]) == ["ViT-B/16", "ViT-L/16", "ViT-H/14", "ResNet50x4 (BiT)", "ResNet152x4 (BiT)"]
    assert list(frame["Last layer (paper)"]) == [900, 235, 100, 225, 90] == list(paper["Tuning type / Last layer"])
    assert list(frame["Full (paper)"]) == [170, 25, 12, 25, 3]
    assert list(frame["Speed Up (paper)"]) == [5.3, 9.4, 8.3, 9, 30]
    assert frame["Last layer vs ViT-B/16 (paper)"].tolist() == pytest.approx([1, 235 / 900, 100 / 900, 0.25, 0.1])
    rows = frame.set_index("Model")
    vit, resnet = expected_per_core("ViT-B/16 / Last layer"), expected_per_core("ResNet50x4 / Last layer")
    assert rows.loc["ViT-B/16", "Last layer img/second/core (ours)"] == pytest.approx(vit)
    assert rows.loc["ResNet50x4 (BiT)", "Last layer img/second/core (ours)"] == pytest.approx(resnet)
    assert rows.loc["ResNet50x4 (BiT)", "Last layer vs ViT-B/16, img/second (ours)"] == pytest.approx(resnet / vit)
    assert rows.loc["ViT-B/16", "stand-in"] == "syn_vip_micro" and rows.loc["ResNet50x4 (BiT)", "stand-in"] == "wrn"
    # 4 batch sizes x 2 learning rates x 4 seeds of private DP-LAMB runs per model
    assert rows.loc["ViT-B/16", "DP-LAMB runs (ours)"] == 32
    assert rows.loc[["ViT-L/16", "ViT-H/14", "ResNet152x4 (BiT)"], "Last layer img/second/core (ours)"].isna().all()
    assert "TPU" in title and any("absolute numbers do not compare" in n for n in notes)
    assert any("No stand-in for ViT-L/16, ViT-H/14, ResNet152x4 (BiT)" in n for n in notes)
    assert not any("recorded neither" in n for n in notes)
    write_table(frame, tmp_path / "mehta_table10.csv", title, notes)


def test_only_columns_named_for_seconds_change_with_the_timing():
    # The workflow tests compare tables of two runs without their columns that say 'second'
    # (tests/conftest.py: deterministic_tables): every timed column must say it.
    fast, _, _ = throughput_table(fake_study(PLAN, "mehta_table2"), VALUES, EMBEDDED, "embedded")
    slow, _, _ = throughput_table(fake_study(PLAN, "mehta_table2", step_seconds=0.03), VALUES, EMBEDDED, "embedded")
    changed = [c for c in fast.columns if not fast[c].equals(slow[c])]
    assert changed == ["core-seconds (ours)", "Last layer img/second/core (ours)"]
    # the ratio between models stays here (every step alike), not in real runs: it says 'second' too
    untimed = [c for c in fast.columns if c.endswith("(ours)") and "second" not in c]
    assert untimed == ["DP-LAMB runs (ours)", "examples (ours)"]


def test_older_results_fall_back_to_the_whole_run_and_the_configured_threads():
    frame, _, notes = throughput_table(fake_study(PLAN, "mehta_table2", timed=False), VALUES, EMBEDDED, "embedded")
    assert any("recorded neither the seconds of their steps nor their threads" in n for n in notes)
    runs = [
        r
        for r in PLAN.runs("mehta_table2")
        if r.row == "ViT-B/16 / Last layer" and r.settings["optimizer"] == "lamb" and r.settings["epsilon"] is not None
    ]
    seconds = sum(STEP_SECONDS * head_steps(r.settings) + 1.0 for r in runs) * EMBEDDED["threads"]
    examples = sum(head_steps(r.settings) * r.settings["batch_fraction"] * TRAIN for r in runs)
    vit = frame.set_index("Model").loc["ViT-B/16"]
    assert vit["core-seconds (ours)"] == pytest.approx(seconds)
    assert vit["Last layer img/second/core (ours)"] == pytest.approx(examples / seconds)


def test_only_table2s_runs_are_read():
    with pytest.raises(ValueError, match="reads the runs of mehta_table2"):
        throughput_table(fake_study(PLAN, "mehta_table1"), VALUES, EMBEDDED, "embedded")
