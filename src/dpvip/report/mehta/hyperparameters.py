"""Mehta et al.'s hyper-parameter Tables 6-9, the paper's settings beside ours, one row per
(setting, model): Tables 6 and 9 (pre-training, JFT and ImageNet-21k) beside what pre-trained
the backbone standing in for each model (from the config: `backbone_pretraining`); Tables 7 and 8
(fine-tuning with momentum SGD and with LAMB) beside the settings the runs of our Tables 1 and 2
recorded. Each table's printed cells (mehta.csv) come first, then the settings its caption and
section state (mehta_settings.yaml). A paper setting with no counterpart here keeps the
paper's value, ours stays empty and a note says why. Torch-free."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from dpvip.plan.transfer import MEHTA_HYPERPARAMETER_TABLES
from dpvip.plan.transfer_runs import stand_in_of, table5_backbone
from dpvip.report.mehta.backbone_pretraining import backbone_pretraining
from dpvip.report.common.paper_values import paper_table
from dpvip.report.common.transfer_cells import feature_parts

TITLES = {
    "table6": "Mehta et al. Table 6: pre-training hyper-parameters (JFT), beside our backbones' pre-training",
    "table7": "Mehta et al. Table 7: fine-tuning hyper-parameters of momentum SGD, beside our Table 1 runs",
    "table8": "Mehta et al. Table 8: fine-tuning hyper-parameters of LAMB, beside our Table 2 runs",
    "table9": "Mehta et al. Table 9: pre-training hyper-parameters (ImageNet-21k ViT-B/16), beside our stand-in's",
}
PRETRAINING = ("table6", "table9")
OPTIMIZER = {"table7": "sgd", "table8": "lamb"}  # the fine-tuning tables' optimizer
ALL_MODELS = "all models"
# Why a paper setting has no value of ours; any other setting is not one of this workflow's stage.
NO_COUNTERPART = {
    "TPU v4 hours": "ours ran on CPU cores, not TPUs; our job times are in results/benchmarks",
    "Pre-trained layer LR multiplier alpha": "it scales the pre-trained layers' learning rate in full fine-tuning; "
    "our head on cached features has no pre-trained layer",
    "Model size": "counted for our MAEs only: a DP-RandP network or a checkpoint file would need building",
}
COLUMNS = ["Hyper-parameter", "Model", "paper", "ours", "ours from", "paper source"]


def load_paper_settings(path: str | Path) -> dict:
    """config/paper_values/mehta_settings.yaml: {table: {source, settings, rows}}."""
    return yaml.safe_load(Path(path).read_text())


def _stand_ins(table: str, paper: pd.DataFrame, mehta: dict) -> dict[str, str | None]:
    """{paper model: the backbone standing in for it, or None}."""
    if table == "table9":  # ImageNet-21k's ViT-B/16 is Table 5's network
        return {model: table5_backbone(mehta) for model in paper.index}
    return {model: stand_in_of(model, mehta) for model in paper.index}


def _row(setting: str, model: str, paper, ours, source: str, where: str) -> dict:
    return dict(zip(COLUMNS, [setting, model, paper, ours, where, source]))


def _pretraining_rows(table: str, paper: pd.DataFrame, caption: dict, mehta: dict, ours: dict) -> list[dict]:
    """Per model the printed cells, then the caption's settings (per model where one model's
    differs, else once per stand-in)."""
    stand_ins = _stand_ins(table, paper, mehta)
    label = f"Table {table.removeprefix('table')}"
    rows = [
        _row(
            column,
            model,
            paper.loc[model, column],
            ours.get(stand_ins[model], {}).get(column),
            label,
            stand_ins[model] or "",
        )
        for model in paper.index
        for column in paper.columns
    ]
    shared = sorted({b for b in stand_ins.values() if b}, key=list(stand_ins.values()).index) or [None]
    per_model = caption.get("rows", {})
    for setting, value in caption["settings"].items():
        if any(setting in changes for changes in per_model.values()):
            rows += [
                _row(
                    setting,
                    model,
                    per_model.get(model, {}).get(setting, value),
                    ours.get(stand_ins[model], {}).get(setting),
                    caption["source"],
                    stand_ins[model] or "",
                )
                for model in paper.index
            ]
        else:
            everyone = ALL_MODELS if len(paper.index) > 1 else paper.index[0]
            rows += [
                _row(setting, everyone, value, ours.get(b, {}).get(setting), caption["source"], b or "") for b in shared
            ]
    return rows


def _distinct(values: list) -> str:
    return ", ".join(f"{v:g}" if isinstance(v, float | int) else str(v) for v in sorted(set(values)))


def _recorded(runs: list[dict]) -> dict[str, str]:
    """What the runs recorded, per setting of the fine-tuning tables: every distinct value (the
    resolution per backbone, as each backbone has its own)."""
    private = [r for r in runs if r["settings"].get("epsilon") is not None]
    features = [feature_parts(r["features"]) for r in runs]
    found = {
        "Learning rate": [r["settings"]["lr"] for r in runs],
        "epochs": [r["settings"]["epochs"] for r in runs],
        "warm-up (epochs)": [r["settings"]["warmup_epochs"] for r in runs],
        "decay": [r["settings"]["schedule"] for r in runs],
        "per-example clip norm with DP": [r["settings"]["clip_norm"] for r in private],
        "crop": [f["crop"] for f in features],
    }
    recorded = {setting: _distinct(values) for setting, values in found.items() if values}
    sizes = {f["backbone"]: [] for f in features}
    for f in features:
        sizes[f["backbone"]].append(int(f["size"]))
    if sizes:
        recorded["resolution (px)"] = "; ".join(f"{_distinct(v)} ({backbone})" for backbone, v in sizes.items())
    return recorded


def _tuning_rows(table: str, paper: pd.DataFrame, caption: dict, results: dict) -> list[dict]:
    runs = [r for r in results["runs"] if r["settings"]["optimizer"] == OPTIMIZER[table]]
    ours, where = _recorded(runs), f"{results['study']} ({OPTIMIZER[table]} runs)"
    label = f"Table {table.removeprefix('table')}"
    rows = [
        _row(
            setting,
            ALL_MODELS,
            ", ".join(f"{v:g}" for v in paper.loc[setting].dropna()),
            ours.get(setting),
            label,
            where,
        )
        for setting in paper.index
    ]
    rows += [
        _row(setting, ALL_MODELS, value, ours.get(setting), caption["source"], where)
        for setting, value in caption["settings"].items()
    ]
    return rows


def _empty_note(frame: pd.DataFrame, stage: str) -> str | None:
    """Why ours is empty where it is: no backbone stands in for the model, or the setting has
    no counterpart here (for some stand-ins only: they are named)."""
    empty = frame["ours"].isna()
    if not empty.any():
        return None
    unmatched = sorted(set(frame.loc[empty & (frame["ours from"] == ""), "Model"]) - {ALL_MODELS})
    missing = {}
    for setting, rows in frame[frame["ours from"] != ""].groupby("Hyper-parameter", sort=False):
        lacking = list(dict.fromkeys(rows.loc[rows["ours"].isna(), "ours from"]))
        if lacking:
            missing[setting] = setting if rows["ours"].isna().all() else f"{setting} of {', '.join(lacking)}"
    parts = [f"{missing[s]} ({NO_COUNTERPART[s]})" for s in missing if s in NO_COUNTERPART]
    others = [label for s, label in missing.items() if s not in NO_COUNTERPART]
    if others:
        parts.append(f"{', '.join(others)} (not settings of this workflow's {stage})")
    if unmatched:
        parts.append(f"every setting of {', '.join(unmatched)} (no backbone here stands in for it)")
    return "Ours left empty, the paper's value kept: " + "; ".join(parts) + "."


def hyperparameter_table(
    table: str,
    study: dict | None,
    values: pd.DataFrame,
    paper_settings: dict,
    section: dict,
    stages: dict,
    scale: str,
) -> tuple[pd.DataFrame, str, list[str]]:
    """(frame, title, notes) of Mehta et al.'s `table` (6-9); `study` is the result file of the
    study MEHTA_HYPERPARAMETER_TABLES names for it (None for 6 and 9), `stages` the config
    sections of the stages that pre-trained our backbones (`backbone_pretraining`)."""
    paper, caption, mehta = paper_table(values, "mehta", table), paper_settings[table], section["mehta"]
    notes = [f"Scale: {scale}. 'paper source' says where the paper prints each value."]
    if table in PRETRAINING:
        ours = {b: backbone_pretraining(b, section, stages) for b in set(_stand_ins(table, paper, mehta).values()) if b}
        frame = pd.DataFrame(_pretraining_rows(table, paper, caption, mehta, ours), columns=COLUMNS)
        notes.append(
            "Ours: what pre-trained the backbone standing in for each model ('ours from'), as this run's config "
            "sets it (pretrain.syn_vip, dp_pretrain, dprandp.phase1). Our Base LR is per 256 examples "
            "(the run's learning rate is Base LR x batch size / 256)."
        )
        if any(section["backbones"][b]["from"] in ("syn_vip", "dp_pretrain") for b in ours):
            notes.append(
                "Model size of an MAE (ours): the trainable parameters of the whole masked autoencoder as pre-trained "
                "(encoder and decoder); the paper's are classifiers', and our transfer uses the encoder only."
            )
        stage = "pre-training"
    else:
        if study is None or study.get("study") != f"mehta_{MEHTA_HYPERPARAMETER_TABLES[table]}":
            raise ValueError(f"Mehta {table} reads the runs of mehta_{MEHTA_HYPERPARAMETER_TABLES[table]}")
        frame = pd.DataFrame(_tuning_rows(table, paper, caption, study), columns=COLUMNS)
        notes.append(
            f"Ours: every distinct value the {OPTIMIZER[table]} runs of {study['study']} recorded "
            "(settings, and the resolution and crop of the features they read); the paper fine-tunes on "
            "ImageNet at 384 px, ours a linear head on cached features of a stand-in."
        )
        stage = "linear head"
    empty = _empty_note(frame, stage)
    return frame, TITLES[table], notes + ([empty] if empty else [])
