"""Mehta et al.'s hyper-parameter Tables 6-9: the paper's cells (mehta.csv) in its order, then
its captions' settings (mehta_settings.yaml), each beside ours: our backbones' pre-training
from the config (6, 9) or what our Table 1 and 2 runs recorded (7, 8); ours empty, with a note,
where nothing here corresponds."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import merged_config
from transfer_studies import fake_study

from dpvip.plan.transfer import TransferPlan
from dpvip.report.mehta.backbone_pretraining import backbone_pretraining
from dpvip.report.mehta.hyperparameters import hyperparameter_table, load_paper_settings
from dpvip.report.common.paper_values import load_paper_values, paper_table
from dpvip.report.common.tables import write_table

ROOT = Path(__file__).resolve().parents[3]
VALUES = load_paper_values(ROOT / "config" / "paper_values")
SETTINGS = load_paper_settings(ROOT / "config" / "paper_values" / "mehta_settings.yaml")
EMBEDDED = merged_config("config.yaml")
PAPER_SCALE = merged_config("config.yaml", "paper.yaml")


def stages(config: dict) -> dict:
    return {
        "syn_vip": config["pretrain"]["syn_vip"],
        "dp_pretrain": config["dp_pretrain"],
        "dprandp": config["dprandp"]["phase1"],
    }


def table(name: str, config: dict = EMBEDDED, study: dict | None = None) -> tuple[pd.DataFrame, list[str]]:
    frame, title, notes = hyperparameter_table(
        name, study, VALUES, SETTINGS, config["dp_transfer"], stages(config), config["scale"]
    )
    assert title.startswith(f"Mehta et al. Table {name.removeprefix('table')}:")
    return frame, notes


def cell(frame: pd.DataFrame, setting: str, model: str, stand_in: str | None = None) -> pd.Series:
    rows = frame[(frame["Hyper-parameter"] == setting) & (frame["Model"] == model)]
    if stand_in is not None:
        rows = rows[rows["ours from"] == stand_in]
    assert len(rows) == 1, (setting, model, stand_in)
    return rows.iloc[0]


def test_the_papers_settings_are_transcribed():
    # Table 6 as printed (in mehta.csv), and the captions' settings as stated.
    printed = paper_table(VALUES, "mehta", "table6")
    assert list(printed.index) == [
        "ViT-B/16",
        "ViT-L/16",
        "ViT-H/14",
        "ViT-H/14 - 4B",
        "ResNet-50x4 (BiT)",
        "ResNet-152x4 (BiT)",
    ]
    assert printed.loc["ResNet-152x4 (BiT)", "TPU v4 hours"] == 11400
    assert printed.loc["ViT-H/14 - 4B", "Epochs"] == 1
    assert list(paper_table(VALUES, "mehta", "table7").loc["Learning rate"]) == [
        0.03,
        0.06,
        0.1,
        0.4,
        1.6,
        6.4,
        25.6,
        102.4,
    ]
    assert list(paper_table(VALUES, "mehta", "table8").loc["Pre-trained layer LR multiplier alpha"].dropna()) == [
        1.0,
        0.1,
        0.01,
        0.001,
        0.0001,
        0.00001,
    ]
    assert SETTINGS["table7"]["settings"]["decay"] == "cosine" and SETTINGS["table8"]["settings"]["decay"] == "linear"
    assert (
        SETTINGS["table6"]["settings"]["weight decay"] == 0.1
        and SETTINGS["table9"]["settings"]["weight decay"] == 0.0001
    )
    assert SETTINGS["table6"]["rows"]["ViT-H/14 - 4B"]["pre-training data"].startswith("JFT-4B")


def test_table6_keeps_the_papers_cells_in_order_beside_our_backbones_pretraining(tmp_path):
    frame, notes = table("table6")
    printed = paper_table(VALUES, "mehta", "table6")
    cells = frame[frame["paper source"] == "Table 6"]
    assert list(zip(cells["Model"], cells["Hyper-parameter"])) == [
        (model, column) for model in printed.index for column in printed.columns
    ]
    assert list(cells["paper"]) == [printed.loc[m, c] for m in printed.index for c in printed.columns]
    # ViT-B/16 and ViT-H/14-4B: the (Syn)-ViP micro MAE; ResNet-50x4: DP-RandP's WRN.
    vit = cell(frame, "Epochs", "ViT-B/16")
    assert (vit["ours from"], vit["ours"]) == ("syn_vip_micro", 8)
    assert cell(frame, "Base LR", "ViT-H/14 - 4B")["ours"] == 0.0015
    assert cell(frame, "Model size", "ViT-B/16")["ours"] == 561_840  # micro MAE, patch 4
    assert cell(frame, "Base LR", "ResNet-50x4 (BiT)")[["ours from", "ours"]].tolist() == ["wrn", 0.12]
    assert cell(frame, "batch size", "all models", "wrn")["ours"] == 256
    assert cell(frame, "batch size", "all models", "syn_vip_micro")[["paper", "ours"]].tolist() == [4096, 128]
    assert cell(frame, "pre-training data", "ViT-H/14 - 4B")["paper"].startswith("JFT-4B")
    assert cell(frame, "pre-training data", "ViT-B/16")["paper"].startswith("JFT-300M")
    # No stand-in: the paper's value, ours empty; the TPU hours never have ours.
    assert frame.loc[frame["Model"] == "ViT-L/16", "ours"].isna().all()
    assert frame.loc[frame["Hyper-parameter"] == "TPU v4 hours", "ours"].isna().all()
    empty = next(n for n in notes if n.startswith("Ours left empty"))
    assert "TPU v4 hours (ours ran on CPU cores" in empty and "Model size of wrn (" in empty
    assert "warm-up" not in empty  # both stand-ins have one (the WRN's is 'none')
    assert "every setting of ResNet-152x4 (BiT), ViT-H/14, ViT-L/16 (no backbone here stands in for it)" in empty
    assert any(n.startswith("Model size of an MAE (ours)") for n in notes)
    write_table(frame, tmp_path / "mehta_table6.csv", "t", notes)
    assert pd.read_csv(tmp_path / "mehta_table6.csv").shape == frame.shape


def test_table6_at_paper_scale_reads_the_dp_run_behind_the_main_network():
    frame, notes = table("table6", PAPER_SCALE)
    main = cell(frame, "pre-training data", "ViT-H/14 - 4B")
    assert main["ours from"] == "vip_base"
    assert main["ours"] == (
        "shaders (synthetic images; MAE base), then DP-MAE on laion (6100 steps of 98304, lr 0.000384, epsilon 8)"
    )
    assert cell(frame, "Model size", "ViT-B/16")[["ours from", "ours"]].tolist() == ["syn_vip_base", 99_046_144]
    assert frame.loc[frame["Model"] == "ResNet-50x4 (BiT)", "ours"].isna().all()  # no stand-in at paper scale
    assert not any("Model size of wrn" in n for n in notes)


def test_table9_is_table5s_network():
    frame, _ = table("table9")
    assert set(frame["Model"]) == {"ViT-B/16"} and set(frame["ours from"]) == {"syn_vip_micro"}
    assert cell(frame, "Epochs", "ViT-B/16")[["paper", "ours"]].tolist() == [300, 8]
    assert cell(frame, "TPU v4 hours", "ViT-B/16")["paper"] == 2700
    assert cell(frame, "augmentation", "ViT-B/16")["paper"].startswith("Mixup 0.2 + RandAugment")


@pytest.mark.parametrize("name, study, optimizer", [("table7", "table1", "sgd"), ("table8", "table2", "lamb")])
def test_tuning_tables_put_what_our_runs_recorded_beside_the_papers_grid(name, study, optimizer):
    plan = TransferPlan(EMBEDDED["dp_transfer"])
    frame, notes = table(name, study=fake_study(plan, f"mehta_{study}"))
    lrs = cell(frame, "Learning rate", "all models")
    grid = paper_table(VALUES, "mehta", name).loc["Learning rate"].dropna()
    assert lrs["paper"] == ", ".join(f"{v:g}" for v in grid)
    assert lrs["ours"] == {"sgd": "0.1, 1.6", "lamb": "0.01, 0.1"}[optimizer]  # config/config.yaml's grids
    assert lrs["ours from"] == f"mehta_{study} ({optimizer} runs)"
    assert cell(frame, "epochs", "all models")[["paper", "ours"]].tolist() == [10, "3"]
    assert cell(frame, "decay", "all models")["ours"] == {"sgd": "cosine", "lamb": "linear"}[optimizer]
    assert cell(frame, "per-example clip norm with DP", "all models")["ours"] == "1"
    assert cell(frame, "resolution (px)", "all models")[["paper", "ours"]].tolist() == [
        384,
        "32 (syn_vip_micro); 12 (wrn)",
    ]
    assert cell(frame, "crop", "all models")["ours"] == "inception"
    assert math.isnan(cell(frame, "weight decay", "all models")["ours"])
    empty = next(n for n in notes if n.startswith("Ours left empty"))
    assert "weight decay, dropout, gradient clipping without DP (not settings of this workflow's linear head)" in empty
    assert ("no pre-trained layer" in empty) == (name == "table8")


def test_a_tuning_table_refuses_another_study():
    plan = TransferPlan(EMBEDDED["dp_transfer"])
    with pytest.raises(ValueError, match="reads the runs of mehta_table1"):
        table("table7", study=fake_study(plan, "mehta_table2"))


def test_backbones_without_a_recorded_pretraining_give_nothing():
    section = EMBEDDED["dp_transfer"] | {
        "backbones": {"mine": {"from": "file", "path": "x.pt", "kind": "mae", "image_size": 32}}
    }
    assert backbone_pretraining("mine", section, stages(EMBEDDED)) == {}
