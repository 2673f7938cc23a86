"""DP-RandP result tables on fake results (the claims: test_dprandp_claims.py): the paper's rows and values in order,
ours (mean and std over seeds) beside them, extra columns after (without a paper twin), the
chance level and the paper's own inconsistencies in the notes, and claims that flip."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from dpvip.plan.dprandp_runs import DPRandPPlan, PrivateRun
from dpvip.report.dprandp.conflicts import CONFLICTS
from dpvip.plan.dprandp_rows import (
    COLD_ROW,
    TABLES,
    WARM_FULL,
    WARM_NO_PHASE2,
    needs,
    table_rows,
)
from dpvip.report.dprandp.tables import TITLES, dprandp_table
from dpvip.report.common.paper_values import load_paper_values, paper_table
from dpvip.report.common.tables import write_table

ROOT = Path(__file__).resolve().parents[3]
VALUES = load_paper_values(ROOT / "config" / "paper_values")
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
# A fixed plan, so that tuning the embedded config does not move these tests' numbers.
CONFIG["dprandp"] = yaml.safe_load("""
phase1: {model: wrn10_1, dataset: stylegan_oriented, method: align_uniform}
private:
  seeds: [0, 1]
  tasks:
    CIFAR-10:
      data: {source: digits, validation_fraction: 0.1}
      batch_size: 128
      delta: 1.0e-5
      schedule:
        - {epsilon: 1, steps: 24, phase2_steps: 4, lr_phase2: 4.0, lr_phase3: 0.5}
        - {epsilon: 8, steps: 24, phase2_steps: 4, lr_phase2: 4.0, lr_phase3: 1.0}
    CIFAR-100: {runs_of: CIFAR-10}
    DermaMNIST: {runs_of: CIFAR-10}
ablations:
  epsilons: [1]
  datasets: [dead_leaves, shaders]
  methods: [moco]
  models: [wrn16_1]
  figure6: {epsilon: 1, phase2_steps: [0, 4, 12, 24]}
  table25: {epsilon: 1, phase2_steps: [0, 4, 24]}
""")
PLAN = DPRandPPlan(CONFIG["dprandp"], CONFIG["synthetic"]["datasets"])
EXAMPLES, BATCH = 1293, 128
EPSILONS = {"table1": "1 2 3 4 6 8 inf", "table3": "1 4 7.42 inf", "table16": "1 4 7.42 inf", "table24": "1 2 3 4 6 8"}
PRINTED_ORDER = {
    name: [f"epsilon={e}" for e in epsilons.split()] for name, epsilons in EPSILONS.items()
}  # as the paper prints them


def fake_result(run: PrivateRun, test: float, validation: float | None = None, steps: int = 24) -> dict:
    """A result file as the training writes it (contract of results/dprandp/<run.path>.json)."""
    finite = math.isfinite(run.epsilon)
    sigma = 10.0 / run.epsilon if finite else None
    spent = 0.998 * run.epsilon if finite else None
    return {
        "run": {
            "task": run.task,
            "init": run.init,
            "model": run.model,
            "phase2_steps": run.phase2_steps,
            "epsilon": run.epsilon if finite else None,
            "seed": run.seed,
        },
        "accuracy": {"test": test, "validation": validation},
        "accuracy_live": {"test": test - 0.5, "validation": None if validation is None else validation - 0.5},
        "privacy": {
            "accountant": "prv",
            "sample_rate": BATCH / EXAMPLES,
            "noise_multiplier": sigma,
            "clip_norm": 1.0,
            "delta": 1e-5,
            "target_epsilon": run.epsilon if finite else None,
            "planned_steps": steps,
            "steps_done": steps,
            "epsilon_spent": spent,
            "epsilon_phase2": spent * (run.phase2_steps / steps) ** 0.5 if finite else None,
            "examples": EXAMPLES,
        },
        "data": {"stand_in": "scikit-learn digits", "train": EXAMPLES, "test": 360, "validation": 144},
        "batch_size": BATCH,
        "augmult": 2,
        "steps": steps,
        "lr_phase2": 4.0,
        "lr_phase3": 0.5,
        "init_checkpoint": "random" if run.init == "cold" else f"results/dprandp/phase1/{run.init}/model.pt",
        "curve": [{"step": 1, "phase": 2 if run.phase2_steps else 3, "loss": 2.3}],
        "seconds": 1.0,
    }


def plan_with_inf(section: dict | None = None) -> DPRandPPlan:
    """The embedded plan with an epsilon = inf (no noise) entry in CIFAR-10's schedule."""
    section = section or CONFIG["dprandp"]
    cifar = section["private"]["tasks"]["CIFAR-10"]
    schedule = [
        *cifar["schedule"],
        {"epsilon": "inf", "steps": 24, "phase2_steps": 4, "lr_phase2": 4.0, "lr_phase3": 1.0},
    ]
    tasks = {**section["private"]["tasks"], "CIFAR-10": {**cifar, "schedule": schedule}}
    return DPRandPPlan({**section, "private": {**section["private"], "tasks": tasks}}, CONFIG["synthetic"]["datasets"])


def default_accuracy(run: PrivateRun) -> float:
    """Warm above cold, more Phase II a little better, seeds 2 points apart."""
    base = 60.0 if run.warm else 40.0
    return base + min(run.phase2_steps, 8) + 0.5 * min(run.epsilon, 10) + 2.0 * run.seed


def fake_results(name: str, accuracy=default_accuracy, plan: DPRandPPlan = PLAN) -> dict[str, dict]:
    return {run.path: fake_result(run, accuracy(run), validation=accuracy(run) - 10) for run in needs(plan, name)}


def table(name: str, results: dict | None = None):
    frame, title, notes = dprandp_table(
        name, PLAN, fake_results(name) if results is None else results, VALUES, scale="embedded"
    )
    return frame.set_index("row"), title, notes


@pytest.mark.parametrize("name", TABLES)
def test_every_paper_row_in_order_with_the_papers_values(name, tmp_path):
    frame, title, notes = table(name)
    printed = paper_table(VALUES, "dprandp", name)
    assert list(frame.index[: len(printed)]) == list(printed.index)
    ours = [c.removesuffix(" (ours)") for c in frame.columns if c.endswith(" (ours)") and " std " not in c]
    expected = [c for c in PRINTED_ORDER.get(name, printed.columns) if not c.endswith(" std")]
    assert ours[: len(expected)] == expected  # the paper's columns first, as printed
    for label in printed.index:
        for column in printed.columns:
            expected, got = printed.at[label, column], frame.at[label, f"{column} (paper)"]
            assert (math.isnan(expected) and math.isnan(got)) or got == expected
    assert title == TITLES[f"dprandp_{name}"] and notes[0].startswith("Scale: embedded.")
    assert any("scikit-learn digits stands in (1293 train / 360 test / 144 validation)" in note for note in notes)
    write_table(frame.reset_index(), tmp_path / f"{name}.csv", title, notes)
    assert (tmp_path / f"{name}.md").exists()


def test_ours_is_the_mean_and_std_over_seeds_and_extra_epsilons_follow():
    frame, _, notes = table("table2")  # the paper prints epsilon 3, 4, 6, 8, inf; we run 1 and 8
    assert frame.at["DP-RandP", "epsilon=8 (ours)"] == pytest.approx(60 + 4 + 4 + 1)  # seeds 0 and 1: +0 and +2
    assert frame.at["DP-RandP", "epsilon=8 std (ours)"] == pytest.approx(math.sqrt(2))
    assert frame.at["DP-RandP", "epsilon=8 std (paper)"] == 0.21
    assert frame.at["DP-SGD", "epsilon=8 (ours)"] == pytest.approx(40 + 4 + 1)
    assert "epsilon=8 std (ours)" in frame.columns and "epsilon=inf std (ours)" not in frame.columns
    assert "epsilon=1 std (ours)" in frame.columns and "epsilon=1 std (paper)" not in frame.columns
    assert math.isnan(frame.at["DP-RandP", "epsilon=3 (ours)"]) and frame.at["DP-RandP", "epsilon=3 (paper)"] == 43.33
    columns = list(frame.columns)
    assert columns.index("epsilon=1 (ours)") > columns.index("epsilon=inf (ours)")  # extra after the paper's
    assert "epsilon=1 (paper)" not in frame.columns  # the paper prints no epsilon 1 for CIFAR-100
    assert frame.at["DP-RandP", "epsilon=1 (ours)"] == pytest.approx(65.5)
    assert any(note.startswith("CIFAR-100 is shown with CIFAR-10's runs") for note in notes)
    assert any(
        ("ε = 1: ours 24 steps (Phase II: 0/4), σ 10" in note and "paper (Table 14) not listed" in note)
        for note in notes
    )
    assert any("ε = 8:" in note and "paper (Table 14) 2468 steps (Phase II: 96), σ 2.6" in note for note in notes)


def test_one_seed_leaves_the_std_empty_and_missing_runs_leave_cells_empty():
    results = {path: result for path, result in fake_results("table1").items() if result["run"]["seed"] == 0}
    frame, _, notes = table("table1", results)
    assert frame.at["DP-RandP", "epsilon=1 (ours)"] == pytest.approx(64.5) and math.isnan(
        frame.at["DP-RandP", "epsilon=1 std (ours)"]
    )
    assert any(note.startswith("4 of 8 runs have no result yet") for note in notes)
    assert all(
        math.isnan(frame.at[row, "epsilon=1 (ours)"])
        for row in (
            "Tramèr and Boneh [61]",
            "Hölzl et al. [35]",
        )
    )
    assert any(
        "Rows/columns without ours" in note and "Tramèr and Boneh [61]" in note and "ScatterNet" in note
        for note in notes
    )


def test_table3_uses_validation_and_table16_test_accuracy():
    table3, _, notes = table("table3")
    table16, _, _ = table("table16")
    assert table3.at["DP-RandP", "epsilon=1 (ours)"] == pytest.approx(65.5 - 10)
    assert table16.at["DP-RandP", "epsilon=1 (ours)"] == pytest.approx(65.5)
    assert "validation accuracy" in notes[0]


def test_table25_turns_phase2_steps_into_epochs_of_our_data():
    frame, _, notes = table("table25")
    row = frame.loc["Accuracy (%)"]
    # 0 steps -> the paper's column 0; 4 x 128 / 1293 = 0.396 -> 0.4; 24 x 128 / 1293 = 2.38 -> 2.4
    assert (
        row["Epochs for Phase II=0 (ours)"] == pytest.approx(40 + 0.5 + 1)
        and row["Epochs for Phase II=0 (paper)"] == 57.46
    )
    assert row["Epochs for Phase II=0 std (paper)"] == 0.48 and row[
        "Epochs for Phase II=0 std (ours)"
    ] == pytest.approx(math.sqrt(2))
    assert row["Epochs for Phase II=0.4 (ours)"] == pytest.approx(40 + 4 + 0.5 + 1)
    assert "Epochs for Phase II=0.4 (paper)" not in frame.columns  # ours only: no paper twin
    assert row["Epochs for Phase II=2.4 (ours)"] == pytest.approx(40 + 8 + 0.5 + 1)
    assert not any(c.startswith("phase2_steps") for c in frame.columns)
    assert any(
        "4 steps → 0.4" in note and "ours with all the steps in Phase II is 2.4 (24 steps)" in note for note in notes
    )
    # With 1280 examples, 4 steps are 0.4 epochs and 20 are exactly 2: the paper's column.
    plan = DPRandPPlan(
        {
            **CONFIG["dprandp"],
            "ablations": {**CONFIG["dprandp"]["ablations"], "table25": {"epsilon": 1, "phase2_steps": [0, 20]}},
        },
        CONFIG["synthetic"]["datasets"],
    )
    results = fake_results("table25", plan=plan)
    for result in results.values():
        result["privacy"]["examples"] = 1280
    frame, _, _ = dprandp_table("table25", plan, results, VALUES)
    assert (
        frame.at[0, "Epochs for Phase II=2 (ours)"] == pytest.approx(40 + 8 + 0.5 + 1)
        and frame.at[0, "Epochs for Phase II=2 (paper)"] == 56.27
    )


def test_table10_has_the_papers_columns_and_ours_for_our_generators():
    frame, _, notes = table("table10")
    row = frame.loc["Accuracy"]
    for column in ("Untrained StyleGAN / Oriented", "Dead leaves textures"):
        assert row[f"{column} (ours)"] == pytest.approx(60 + 8 + 0.5 + 1)
    assert math.isnan(row["Stat Color+WMM (ours)"]) and row["Stat Color+WMM (paper)"] == 64.59
    assert row["Shaders (ours)"] == pytest.approx(60 + 8 + 0.5 + 1)
    assert list(frame.columns).index("Shaders (ours)") > list(frame.columns).index("Feature Vis Dead leaves (ours)")
    assert any("Baradad et al." in note and "Stat Color+WMM" in note for note in notes)


def test_table12_names_our_stand_in_models():
    frame, _, notes = table("table12")
    assert frame.at["DP-RandP / WRN-40-4", "epsilon=1 (ours)"] == pytest.approx(65.5)
    assert "wrn16_1" in frame.at["DP-RandP / WRN-40-4", "our runs"]
    assert any("our wrn10_1 stands in for WRN-16-4; our wrn16_1 stands in for WRN-40-4" in note for note in notes)


def test_rows_fill_only_their_labels():
    labels = {row.label for row in table_rows(PLAN, "table24")}
    assert labels == {WARM_FULL, WARM_NO_PHASE2, COLD_ROW}


@pytest.mark.parametrize("name", TABLES)
def test_only_printed_columns_have_a_paper_twin_and_none_says_ours_twice(name):
    frame, _, _ = table(name)
    printed = set(paper_table(VALUES, "dprandp", name).columns)
    for column in frame.columns:
        assert column.count("(ours)") <= 1 and column.count("(paper)") <= 1, column
        if column.endswith(" (paper)"):
            assert column.removesuffix(" (paper)") in printed, column


def test_a_column_only_we_run_is_headed_ours_alone():
    frame, _, _ = table("table25")
    extra = [c for c in frame.columns if c.startswith("Epochs for Phase II=0.4")]
    assert extra == ["Epochs for Phase II=0.4 (ours)", "Epochs for Phase II=0.4 std (ours)"]
    frame, _, _ = table("table10")
    assert [c for c in frame.columns if c.startswith("Shaders")] == ["Shaders (ours)"]


def inconsistency_notes(name: str) -> list[str]:
    return [note for note in table(name)[2] if note.startswith("Paper inconsistency")]


def test_tables_that_print_a_conflicting_number_say_where_the_paper_prints_the_other():
    (de_et_al,) = inconsistency_notes("table1")
    assert "77.0 in Table 1 but 71.0 in Tables 11 and 24; shown here: 77.0 (Table 1)" in de_et_al
    assert "likely a typo" in de_et_al
    (warm,) = inconsistency_notes("table6")
    assert "82.90 in Tables 6 and 12 but 82.96 in Tables 11 and 24; shown here: 82.90 (Table 6)" in warm
    for name in ("table11", "table24"):
        de_et_al, warm = inconsistency_notes(name)
        assert f"shown here: 71.0 ({name.replace('table', 'Table ')})" in de_et_al
        assert f"shown here: 82.96 ({name.replace('table', 'Table ')})" in warm
    assert len(inconsistency_notes("table12")) == 1 and inconsistency_notes("table2") == []


def test_every_conflicting_number_the_paper_prints_is_a_place_of_its_conflict():
    """The CSV's epsilon = 6 cells holding 71.0, 77.0, 82.90 or 82.96 in a table we build are
    exactly the places the conflicts list (a table printing one cannot lack the note)."""
    cells = VALUES[(VALUES["paper"] == "dprandp") & (VALUES["column"] == "epsilon=6")]
    cells = cells[cells["table"].isin(TABLES) & cells["value"].isin([71.0, 77.0, 82.90, 82.96])]
    places = {(p.table, p.row) for conflict in CONFLICTS for p in conflict.places}
    assert set(zip(cells["table"], cells["row"])) == places


def test_no_note_once_the_paper_values_agree():
    agreed = VALUES.copy()
    agreed.loc[
        (agreed["table"] == "table1") & (agreed["row"] == "De et al. [15]") & (agreed["column"] == "epsilon=6"), "value"
    ] = 71.0
    _, _, notes = dprandp_table("table1", PLAN, fake_results("table1"), agreed)
    assert not any(note.startswith("Paper inconsistency") for note in notes)


def near_chance(run: PrivateRun) -> float:
    """DP-RandP below chance, w/o Phase II just above it (within noise), the cold start well above."""
    if run.init == "cold":
        return 50.0
    return 8.0 if run.phase2_steps else 12.0


def test_tables_state_the_chance_level_and_flag_our_cells_at_or_near_it():
    _, _, notes = table("table24", fake_results("table24", near_chance))
    assert (
        "Chance level: 10 classes of scikit-learn digits (standing in for CIFAR-10), so guessing scores 10%." in notes
    )
    assert "At or below chance (10%): DP-RandP, epsilon=1 (8.0); DP-RandP, epsilon=8 (8.0)." in notes
    (near,) = [note for note in notes if note.startswith("Above chance")]
    # 2 x sqrt(0.1 x 0.9 / 360) = 3.16 points on the 360 test images
    assert "360 evaluated examples (≤ 13.2%)" in near
    assert "DP-RandP w/o Phase II, epsilon=1 (12.0)" in near and "Phase III only" not in near
    # Table 3 reads the validation split (accuracy - 10 here): 144 images, 5 points of noise
    _, _, notes = table("table3", fake_results("table3", lambda run: 24.0))
    assert any("144 evaluated examples (≤ 15%)" in note and "DP-RandP, epsilon=1 (14.0)" in note for note in notes)


def test_the_chance_level_follows_the_data_not_the_papers_task():
    _, _, notes = table("table2")  # digits stands in for CIFAR-100: 10 classes, not 100
    assert any("10 classes of scikit-learn digits (standing in for CIFAR-100)" in note for note in notes)
    results = fake_results("table2")
    for result in results.values():
        result["data"] = {"train": EXAMPLES, "test": 10_000, "validation": None}  # real data, classes unrecorded
    _, _, notes = table("table2", results)
    assert "Chance level: 10 classes of CIFAR-10, so guessing scores 10%." in notes  # the runs CIFAR-100 shows
    for result in results.values():
        result["data"]["classes"] = 20  # recorded: it wins
    _, _, notes = table("table2", results)
    assert any(note.startswith("Chance level: 20 classes") for note in notes)
