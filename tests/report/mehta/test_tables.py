"""Mehta et al.'s Tables 1-5 on fake study results: the paper's rows in order with its values,
ours beside them where a backbone stands in, deltas against the base, and the notes where they
apply (selection, shared stand-ins, batch sizes, chance level and the cells at it, the grid's
composed privacy, every epsilon's sigma)."""

from __future__ import annotations

import matplotlib
import pytest
from conftest import merged_config
from transfer_studies import (
    CELL,
    EMBEDDED,
    PAPER_PRACTICE,
    VALUES,
    fake,
    fake_study,
    validation_favours_small_rates,
    with_ledgers,
)

from dpvip.plan.transfer import TransferPlan
from dpvip.report.common.paper_values import paper_table
from dpvip.report.common.tables import write_table
from dpvip.report.common.transfer_cells import study_cells
from dpvip.report.mehta.tables import mehta_table
from dpvip.report.privacy.grid import grid_notes
from dpvip.selection import TEST_LABEL

matplotlib.use("Agg")


def test_test_selection_is_the_papers_practice_and_the_notes_say_so():
    results = fake_study(PAPER_PRACTICE, "mehta_table1", validation=validation_favours_small_rates)
    assert not any("validation" in run["settings"] for run in results["runs"])  # trained on the whole split
    cell = study_cells(results)[CELL]
    assert (cell.lr, cell.mean, cell.selection, cell.validation) == (1.6, pytest.approx(57.5), "test", None)
    old = {key: value for key, value in results.items() if key != "selection"}  # an older result: on test too
    assert study_cells(old)[CELL] == cell
    _, _, notes = mehta_table("table1", results, VALUES, EMBEDDED, "embedded")
    assert any(TEST_LABEL in note for note in notes)
    assert any(note.startswith("Selection: each cell's learning rate " + TEST_LABEL) for note in notes)
    grids = grid_notes([with_ledgers(fake_study(PAPER_PRACTICE, "mehta_table5"))])  # single steps: quick to compose
    assert grids and all("picked on test accuracy (the paper's practice; optimistic)" in note for note in grids)


def test_validation_notes_say_what_chose_and_what_the_guarantee_covers():
    results = fake("mehta_table1", validation=validation_favours_small_rates)
    _, _, notes = mehta_table("table1", results, VALUES, EMBEDDED, "embedded")
    assert not any(TEST_LABEL in note for note in notes)
    assert any(
        note.startswith("Each cell: the learning rate of the grid with the best mean validation") for note in notes
    )
    (selection,) = [note for note in notes if note.startswith("Selection: ")]
    assert "picked on validation accuracy: 10% of the training split held out (uniformly at random" in selection
    (privacy,) = [note for note in notes if note.startswith("Privacy of the pick: ")]
    assert "held out of the private set" in privacy and "no DP guarantee" in privacy
    grids = grid_notes([with_ledgers(fake("mehta_table5"))])
    assert grids and all("validation share held out of the private set" in note for note in grids)


@pytest.mark.parametrize("table", ["table1", "table2"])
def test_batch_tables_keep_every_paper_row_and_fill_last_layer_rows_of_stand_ins(table, tmp_path):
    frame, title, notes = mehta_table(table, fake(f"mehta_{table}"), VALUES, EMBEDDED, "embedded")
    paper = paper_table(VALUES, "mehta", table)
    assert list(frame["Model / Tuning type"]) == list(paper.index)
    for column in paper.columns:
        assert list(frame[f"{column} (paper)"]) == list(paper[column])
    full = frame[frame["Model / Tuning type"].str.endswith("Full")]
    assert full[[c for c in frame.columns if c.endswith("(ours)")]].isna().all().all()
    vit = frame[frame["Model / Tuning type"] == "ViT-B/16 / Last layer"].iloc[0]
    assert vit["stand-in"] == "syn_vip_micro"
    assert vit["With privacy / batch=2^17 (ours)"] > 0
    assert any("Full fine-tuning rows" in note for note in notes)
    write_table(frame, tmp_path / f"mehta_{table}.csv", title, notes)
    assert (tmp_path / f"mehta_{table}.md").read_text().count("ViT-B/16") >= 2


def test_table3_adds_a_row_per_backbone_and_says_why_paper_rows_are_not_reproduced():
    frame, _, notes = mehta_table("table3", fake("mehta_table3"), VALUES, EMBEDDED, "embedded")
    ours = frame[frame["Model / Tuning type"].str.startswith("Ours: ")]
    assert set(ours["stand-in"]) == set(EMBEDDED["backbones"])
    assert ours["With privacy / batch=2^20 (ours)"].notna().all()
    assert any("not public" in note for note in notes)


def test_table4_deltas_are_against_our_base():
    frame, _, _ = mehta_table("table4", fake("mehta_table4"), VALUES, EMBEDDED, "embedded")
    assert frame["Change"].iloc[0] == "No change"
    base = frame["Accuracy (ours)"].iloc[0]
    others = frame.iloc[1:]
    assert (others["Delta (ours)"] == others["Accuracy (ours)"] - base).all()
    assert frame.set_index("Change").loc["DP-LAMB -> DP-SGD with Momentum", "Delta (paper)"] == -3.8


def test_table5_has_every_dataset_and_epsilon():
    frame, _, _ = mehta_table("table5", fake("mehta_table5"), VALUES, EMBEDDED, "embedded")
    assert list(frame["Finetuning Dataset"]) == ["CIFAR-10", "CIFAR-100", "ImageNet-1k"]
    assert frame[[c for c in frame.columns if c.endswith("(ours)")]].notna().all().all()


PAPER_SCALE = merged_config("config.yaml", "paper.yaml")["dp_transfer"]


def notes_of(table: str, section: dict = EMBEDDED, **options) -> list[str]:
    study = fake_study(TransferPlan(section), f"mehta_{table}", **options)
    return mehta_table(table, study, VALUES, section, "embedded")[2]


def test_table5_says_its_rows_are_one_stand_in_run_three_times_at_embedded_scale_only():
    shared = [n for n in notes_of("table5") if n.startswith("Rows ")]
    assert shared == [
        "Rows CIFAR-10, CIFAR-100, ImageNet-1k all use the stand-in dataset photos: they are one experiment run "
        "3 times, not 3 datasets; they differ only by each run's own randomness (noise, batches), which their "
        "spread measures."
    ]
    # The paper config fine-tunes on three real datasets: no such note, and each its own chance level.
    paper = notes_of("table5", PAPER_SCALE)
    assert not [n for n in paper if n.startswith("Rows ")]
    assert [n for n in paper if n.startswith("Chance level")] == [
        "Chance level: 10 classes of CIFAR-10, so guessing scores 10%.",
        "Chance level: 100 classes of CIFAR-100, so guessing scores 1%.",
        "Chance level: 1000 classes of ImageNet-1k, so guessing scores 0.1%.",
    ]


def test_two_models_on_one_backbone_are_said_to_share_it():
    section = EMBEDDED | {"mehta": EMBEDDED["mehta"] | {"models": {"ViT-B/16": "wrn", "ResNet50x4": "wrn"}}}
    assert [n for n in notes_of("table1", section) if n.startswith("Rows ")] == [
        "Rows ViT-B/16, ResNet50x4 all use the stand-in model wrn: they are one experiment run 2 times, not 2 "
        "models; they differ only by each run's own randomness (noise, batches), which their spread measures."
    ]
    assert not [n for n in notes_of("table1") if n.startswith("Rows ")]


@pytest.mark.parametrize(
    "table, batches, best, full, stand_ins",
    [
        ("table1", True, False, True, "ViT-B/16 -> syn_vip_micro, ResNet50x4 -> wrn, ImageNet-1k -> photos"),
        ("table2", True, True, True, "ViT-B/16 -> syn_vip_micro, ResNet50x4 -> wrn, ImageNet-1k -> photos"),
        ("table3", True, True, True, "ImageNet-1k -> photos"),
        ("table4", False, False, False, "ViT-H/14-4B (the main network) -> syn_vip_micro, ImageNet-1k -> photos"),
        (
            "table5",
            False,
            False,
            False,
            "ViT-B/16 (ImageNet-21k) -> syn_vip_micro, CIFAR-10 -> photos, CIFAR-100 -> photos, ImageNet-1k -> photos",
        ),
    ],
)
def test_notes_appear_exactly_where_they_apply(table, batches, best, full, stand_ins):
    notes = notes_of(table)
    assert f"Stand-ins: {stand_ins}." in notes
    batch_notes = [n for n in notes if n.startswith("Batch sizes are fractions of n")]
    assert len(batch_notes) == batches
    assert any("'Best' is momentum SGD" in n for n in notes) == best
    assert any(n.startswith("Full fine-tuning rows") for n in notes) == full
    assert any(n.startswith("Every row at the largest batch: 2^20 -> 0.8185") for n in notes) == (table == "table4")
    assert any(n.startswith("Epochs row: the paper's base trains 10 epochs, ours 3") for n in notes) == (
        table == "table4"
    )
    # The chance level of the stand-in, in every accuracy table; no cell of these runs is near it.
    standing_in = "CIFAR-10, CIFAR-100, ImageNet-1k" if table == "table5" else "ImageNet-1k"
    assert [n for n in notes if n.startswith("Chance level")] == [
        f"Chance level: 11 classes of photo crops (11 scikit-image photographs) (standing in for {standing_in}), "
        "so guessing scores 9.09%."
    ]
    assert not any(n.startswith(("At or below chance", "Above chance")) for n in notes)


def test_cells_at_chance_are_flagged():
    def accuracy(run):  # LeCun normal init at exactly chance, as in our embedded run; one cell near it
        if run.row == "Zero Init -> Lecun Normal Init":
            return 9.0
        return 10.0 if run.row.startswith("Clip at 1 -> 0.1") else 40.0 + run.settings["seed"]

    notes = notes_of("table4", accuracy=accuracy)
    assert "At or below chance (9.09%): Zero Init -> Lecun Normal Init / Accuracy (9.0)." in notes
    near = [n for n in notes if n.startswith("Above chance")]
    assert near == [
        "Above chance by less than 2 binomial standard errors of one run on 1650 evaluated examples (≤ 10.5%), "
        "so not told apart from guessing: Clip at 1 -> 0.1 / Accuracy (10.0)."
    ]


def test_table5_privacy_note_gives_every_epsilons_sigma():
    note = next(n for n in notes_of("table5") if n.startswith("Noise"))
    for epsilon in (0.5, 1, 2, 4, 8):  # the fake ledger's sigma is 3 / epsilon
        assert f"sigma {3 / epsilon:.3g} (epsilon {epsilon:g} at delta 1.0e-06, prv)" in note
