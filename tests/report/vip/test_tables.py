"""ViP result tables: the paper's rows and values, ours beside them, our extra rows after."""

from __future__ import annotations

import math
from pathlib import Path

from dpvip.report.common.paper_values import load_paper_values
from dpvip.plan.vip_rows import Row
from dpvip.report.vip.tables import (
    SAMPLES,
    ours_by_backbone,
    run_facts,
    sample_count,
    selection_notes,
    stand_in_notes,
    vip_table,
)
from dpvip.plan.vip_runs import DPRun

VALUES = load_paper_values(Path(__file__).resolve().parents[3] / "config" / "paper_values")


def test_paper_values_sit_beside_ours_and_unmatched_rows_follow():
    rows = [
        Row("(Syn)-ViP", {"ImageNet-1K": ("syn_vip_micro", "ImageNet-1K")}, "syn_vip_micro"),
        Row("ViP-micro", {"ImageNet-1K": ("vip_micro", "ImageNet-1K")}, "vip_micro"),
    ]
    results = [
        {
            "evaluation": {"task": "linear_probe", "backbone": "syn_vip_micro", "dataset": "ImageNet-1K"},
            "columns": {"ImageNet-1K": 71.5},
        },
        {
            "evaluation": {"task": "linear_probe", "backbone": "vip_micro", "dataset": "ImageNet-1K"},
            "columns": {"ImageNet-1K": 80.0},
        },
    ]
    table = vip_table("vip_table1", VALUES, rows, ours_by_backbone(results)).set_index("model")
    assert table.at["(Syn)-ViP", "ImageNet-1K (paper)"] == 49.8 and table.at["(Syn)-ViP", "ImageNet-1K (ours)"] == 71.5
    assert table.at["(Syn)-ViP", "our run"] == "syn_vip_micro"
    assert math.isnan(table.at["(Syn)-ViP", "Places-365 (ours)"])  # not evaluated
    assert math.isnan(table.at["TAN", "ImageNet-1K (ours)"]) and table.at["TAN", "our run"] == "—"
    assert list(table.index)[-1] == "ViP-micro" and math.isnan(table.at["ViP-micro", "ImageNet-1K (paper)"])


def test_run_facts_come_from_the_ledger_and_the_run():
    run = DPRun("vip_micro_dec1", "micro_dec1", "micro", {"mask_ratio": 0.5}, "decoder_depth", 1)
    ledger = {"examples": 2_000_000, "sample_rate": 98304 / 2_000_000, "noise_multiplier": 2.87}
    facts = run_facts({run.name: run}, {run.name: ledger}, {"vip_micro_dec1": 1.25})[run.name]
    assert facts == {
        "# parameters": 1.25,
        "Batch Size": 98304,
        "# Train data": 2.0,
        SAMPLES: 2.0,
        "Noise sigma": 2.87,
        "decoder depth": 1,
        "masking ratio": 0.5,
    }


def test_sample_counts_carry_their_unit_and_small_counts_stay_exact():
    assert sample_count(1.281167) == "1.28M"
    assert sample_count(1.0) == "1M" and sample_count(233.0) == "233M"
    assert sample_count(2048 / 1e6) == "2,048"  # not "0.002", nor rounded to 0
    assert sample_count(math.nan) == ""


def test_table1_fills_our_pre_train_samples_with_units():
    run = DPRun("vip_micro", "micro", "micro", {}, "main", None)
    ledger = {"examples": 2048, "sample_rate": 128 / 2048, "noise_multiplier": 1.0}
    ours = run_facts({run.name: run}, {run.name: ledger}, {}, {"syn_vip_micro": 4096})
    rows = [
        Row("(Syn)-ViP", {SAMPLES: ("syn_vip_micro", SAMPLES)}, "syn_vip_micro"),
        Row("ViP-LAION", {SAMPLES: ("vip_micro", SAMPLES)}, "vip_micro"),
    ]
    table = vip_table("vip_table1", VALUES, rows, ours).set_index("model")
    assert table.at["ViP-LAION", f"{SAMPLES} (paper)"] == "233M"
    assert table.at["ViP-LAION", f"{SAMPLES} (ours)"] == "2,048"
    assert table.at["(Syn)-ViP", f"{SAMPLES} (ours)"] == "4,096"
    assert table.at["TAN", f"{SAMPLES} (paper)"].endswith("M") and table.at["TAN", f"{SAMPLES} (ours)"] == ""


def test_notes_name_the_scale_and_each_stand_in_once():
    results = [
        {
            "evaluation": {"task": "linear_probe", "backbone": b, "dataset": "ImageNet-1K"},
            "data": {"stand_in": "scikit-learn digits", "train": 1437, "test": 360},
        }
        for b in ("a", "b")
    ] + [
        {
            "evaluation": {"task": "coco", "backbone": "a", "dataset": None},
            "data": {"stand_in": "generated shapes", "train": 64, "test": 16},
        }
    ]
    notes = stand_in_notes(results, "embedded")
    assert notes[0].startswith("Scale: embedded.")
    assert notes[1:] == [
        "COCO 2017: generated shapes stands in (64 train / 16 test)",
        "ImageNet-1K: scikit-learn digits stands in (1437 train / 360 test)",
    ]


def test_selection_notes_say_how_each_grid_was_picked():
    def probe(selection: dict | None) -> dict:
        grid = {"accuracy": 0.5, "blr": 1.0, "grid": {"1.0": 0.5}} | ({"selection": selection} if selection else {})
        return {"evaluation": {"task": "linear_probe"}, "grid": grid} | ({"selection": selection} if selection else {})

    held = {"mode": "validation", "fraction": 0.1, "seed": 0, "stratified": True}
    assert selection_notes([probe(held), probe(held)]) == [
        "Linear probing: base learning rate picked on validation accuracy: 10% of the training split held out "
        "(stratified by class, seed 0), every grid point trained on the rest; the value shown is the chosen "
        "point's test accuracy."
    ]
    on_test = "Linear probing: base learning rate picked on test accuracy (the paper's practice; optimistic)."
    assert selection_notes([probe({"mode": "test"})]) == [on_test]
    assert selection_notes([probe(None)]) == [on_test]  # an older result: chosen on test
    few_shot = {"evaluation": {"task": "few_shot"}, "grid": {"selection": {"mode": "test"}}}
    assert selection_notes([few_shot, {"evaluation": {"task": "coco"}}]) == [
        "Few-shot: learning rate picked on test accuracy (the paper's practice; optimistic)."
    ]
