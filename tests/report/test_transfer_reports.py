"""Mehta et al.'s tables and figures and DP-RandP's probing tables on fake study results:
the paper's rows in order with its values, ours beside them where a backbone stands in,
the best learning rate's mean over seeds, deltas against the base, and the paper's own
sigmas composed."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest
from conftest import merged_config

from dpvip.report import mehta_figures
from dpvip.report.dprandp_probe_tables import probe_table
from dpvip.report.mehta_tables import mehta_table
from dpvip.report.paper_values import load_paper_values, paper_table
from dpvip.report.tables import write_table
from dpvip.report.transfer_cells import study_cells
from dpvip.plan.transfer import TransferPlan

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[2]
VALUES = load_paper_values(ROOT / "config" / "paper_values")
EMBEDDED = merged_config("config.yaml")["dp_transfer"]
PLAN = TransferPlan(EMBEDDED)


def fake(study: str) -> dict:
    runs = []
    for run in PLAN.runs(study):
        s = run.settings
        if run.kind == "head":
            privacy = (
                None
                if s["epsilon"] is None
                else {
                    "accountant": s["accountant"],
                    "sample_rate": s["batch_fraction"],
                    "noise_multiplier": 3.0,
                    "planned_steps": 12,
                    "epsilon_spent": s["epsilon"],
                    "delta": s["delta"],
                }
            )
        else:
            privacy = (
                None
                if s["epsilon"] is None
                else {
                    "sigma_mean": 2.0 if s["sigma_ratio"] else None,
                    "sigma_sgd": 40.0,
                    "steps": s["steps"],
                    "epsilon": s["epsilon"],
                    "delta": s["delta"],
                    "mu": 0.3,
                }
            )
        runs.append(run.record() | {"result": {"accuracy": 40.0 + 10 * s["lr"] + s["seed"], "privacy": privacy}})
    return {"study": study, "runs": runs}


def test_cells_take_the_best_learning_rate_and_average_its_seeds():
    cells = study_cells(fake("mehta_table1"))
    cell = cells[("ViT-B/16 / Last layer", "With privacy / batch=2^20")]
    assert cell.lr == 1.6  # 40 + 16 + seed beats 40 + 4 + seed
    assert cell.mean == pytest.approx(57.0) and cell.std == pytest.approx(1.0)  # seeds 0, 1, 2
    assert cell.seeds == 3


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


@pytest.mark.parametrize("table", ["table4", "table5", "table22", "table23"])
def test_probe_tables_put_ours_beside_the_paper_per_epsilon(table, tmp_path):
    study = "dprandp_probe_cifar" if table in ("table4", "table22") else "dprandp_probe_imagenet"
    frame, title, notes = probe_table(table, fake(study), VALUES, EMBEDDED, "embedded")
    assert len(frame) >= 2
    if table == "table4":
        row = frame[frame["epsilon"] == 0.1].iloc[0]
        assert row["accuracy (paper)"] == 57.10 and row["std (paper)"] == 0.42
        assert row["accuracy (ours)"] == pytest.approx(40 + 8 + 0.5)
        assert frame["epsilon"].iloc[-1] == "inf (without privacy)"
    if table == "table22":
        assert frame.set_index("epsilon").loc[1.0, "sigma (paper)"] == 38
    if table == "table23":
        by_epsilon = frame.set_index("epsilon")
        assert by_epsilon.loc[1.0, "σ_1 (paper)"] == 71
        assert 0.5 < by_epsilon.loc[1.0, "epsilon of the paper's sigmas"] < 1.5
        assert 5 < by_epsilon.loc[8.0, "epsilon of the paper's sigmas"] < 11
    write_table(frame, tmp_path / f"dprandp_{table}.csv", title, notes)


@pytest.mark.parametrize("figure", ["figure1b", "figure2"])
def test_figures_draw_every_series(figure):
    drawn = getattr(mehta_figures, figure)(fake(f"mehta_{figure}"), EMBEDDED, "embedded")
    lines = sum(len(axis.lines) + len(axis.containers) for axis in drawn.axes)
    assert lines >= (3 if figure == "figure1b" else 4)
