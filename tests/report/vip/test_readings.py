"""Reading the ViP tables right: COCO AP in points, chance levels stated, a random-init
baseline labelled as such, degenerate results (background-only segmentation, accuracy at
chance) flagged, and nothing flagged on a result that learned something."""

from __future__ import annotations

import pandas as pd

from dpvip.report.vip.readings import TRIVIAL_ROW, label_random_baselines, reading_notes, with_trivial_row
from dpvip.report.vip.tables import ours_by_backbone

DIGITS = {"stand_in": "scikit-learn digits", "train": 1437, "test": 360}


def result(task, backbone, columns, dataset=None, **extra):
    return {"evaluation": {"task": task, "backbone": backbone, "dataset": dataset}, "columns": columns} | extra


def test_coco_ap_is_reported_in_the_points_the_evaluation_stored():
    coco = result("coco", "vip_micro", {"COCO AP box": 5.86, "COCO AP mask": 4.01})
    assert ours_by_backbone([coco])["vip_micro"] == {"COCO AP box": 5.86, "COCO AP mask": 4.01}
    notes = reading_notes([coco], ["COCO AP box", "COCO AP mask", "ADE20K mIoU"])
    assert any("COCO AP in points (0-100)" in n for n in notes) and any("mIoU in %" in n for n in notes)


def test_chance_levels_and_results_at_chance():
    probe = result("linear_probe", "vip_micro", {"ImageNet-1K": 95.3}, "ImageNet-1K", data=DIGITS)
    finetune = result("dp_finetune", "vip_micro", {"Top-1 Accuracy": 10.0, "epsilon": 7.9}, "ImageNet-1K", data=DIGITS)
    notes = reading_notes([probe, finetune], ["ImageNet-1K", "Top-1 Accuracy", "epsilon"])
    assert "Chance level (1 / classes): ImageNet-1K 10% (10 classes of scikit-learn digits)." in notes
    at_chance = [n for n in notes if "chance (10%)" in n]
    assert at_chance == ["At or below chance (10%): vip_micro Top-1 Accuracy (dp_finetune) (10.0)."]
    # the probe's 95.3 is not flagged, nor is epsilon


def test_real_data_takes_the_papers_class_count():
    probe = result("linear_probe", "vip_base", {"ImageNet-1K": 0.09}, "ImageNet-1K", data={"train": 10, "test": 5})
    notes = reading_notes([probe], ["ImageNet-1K"])
    assert "Chance level (1 / classes): ImageNet-1K 0.1% (1000 classes of ImageNet-1K)." in notes
    assert "At or below chance (0.1%): vip_base ImageNet-1K (linear_probe) (0.1)." in notes


def test_background_only_segmentation_is_flagged():
    ade = result("ade20k", "vip_micro", {"ADE20K mIoU": 21.38}, scores={"per_class": [85.5, 0.0, 0.0, 0.0]}, data={})
    learned = result("ade20k", "syn_vip_micro", {"ADE20K mIoU": 35.0}, scores={"per_class": [85.5, 30.0, 0, 24.5]})
    notes = reading_notes([ade, learned], ["ADE20K mIoU"])
    degenerate = [n for n in notes if n.startswith("Degenerate")]
    assert len(degenerate) == 1 and "vip_micro's segmentation predicts the background only" in degenerate[0]


def test_a_random_init_baseline_says_it_is_not_the_model_of_its_row():
    resnet = result(
        "few_shot",
        "cnn_resnet50",
        {"CIFAR-100 10-shot": 34.4},
        "CIFAR-100",
        grid={"init": "random", "arch": "resnet50"},
    )
    frame = pd.DataFrame({"model": ["SimCLR", "ViP"], "our run": ["cnn_resnet50", "vip_micro"]})
    labelled = label_random_baselines(frame, [resnet])
    assert list(labelled["our run"]) == ["cnn_resnet50 (random init: not SimCLR)", "vip_micro"]
    assert any("cnn_resnet50 is a resnet50 from random initialisation" in n for n in reading_notes([resnet], []))


def test_chance_is_over_the_classes_tested_and_the_note_names_the_missing_one():
    from dpvip.report.claims.chance import chance_note
    from dpvip.report.vip.readings import chance

    data = {"train": 4, "test": 3, "classes": 4, "classes_tested": 3, "classes_missing_from_test": ["chelsea"]}
    probe = result("linear_probe", "vip_micro", {"mine": 50.0}, "mine", data=data)
    level = chance(probe)
    assert level.classes == 3 and abs(level.level - 100 / 3) < 1e-9
    assert "its test split lacks class(es) chelsea of the training split, so chance is over the 3 classes tested" in (
        chance_note(level)
    )


def test_an_undefined_ap_is_said_in_the_table_notes():
    """detectron2's NaN AP (nothing detected) leaves the cells empty; the note says why."""
    why = "detectron2 reported NaN for bbox/AP: no detection above the score threshold to score"
    coco = result("coco", "vip_micro", {"COCO AP box": None, "COCO AP mask": None}, data={"undefined": why})
    notes = reading_notes([coco], ["COCO AP box", "COCO AP mask"])
    assert f"coco of vip_micro: its cells are empty because {why}" in notes


def test_the_dense_tables_show_the_trivial_predictors_beside_ours():
    coco = result(
        "coco",
        "vip_micro",
        {"COCO AP box": 3.1, "COCO AP mask": 1.9},
        trivial={"columns": {"COCO AP box": 0.014, "COCO AP mask": 0.0}, "rule": "every box the whole image"},
    )
    ade = result(
        "ade20k",
        "vip_micro",
        {"ADE20K mIoU": 63.0},
        trivial={"columns": {"ADE20K mIoU": 17.2}, "rule": "every pixel background"},
    )
    columns = ["COCO AP box", "COCO AP mask", "ADE20K mIoU"]
    table = pd.DataFrame(
        [{"model": "ViP", "our run": "vip_micro"} | {f"{c} ({s})": 1.0 for c in columns for s in ("paper", "ours")}]
    )
    shown = with_trivial_row(table, [coco, ade], columns)
    assert len(shown) == 2 and shown.loc[1, "model"] == TRIVIAL_ROW
    assert (shown.loc[1, "COCO AP box (ours)"], shown.loc[1, "ADE20K mIoU (ours)"]) == (0.014, 17.2)
    assert pd.isna(shown.loc[1, "COCO AP box (paper)"])  # the paper prints no such row
    notes = reading_notes([coco, ade], columns)
    assert f"{TRIVIAL_ROW} (last row): every box the whole image: COCO AP box 0.01, COCO AP mask 0.00." in " ".join(
        notes
    )
    assert any("every pixel background: ADE20K mIoU 17.20" in note for note in notes)
    # a table without dense columns gets no such row
    assert with_trivial_row(table, [coco, ade], ["ImageNet-1K"]).equals(table)
