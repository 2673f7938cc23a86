"""Mehta et al.'s Tables 1-5: every printed row, the paper's value beside ours where one of
our backbones stands in for the paper's model; the other rows keep the paper's value alone
and a note says why (full fine-tuning is not this stage's; the JFT models are not public)."""

from __future__ import annotations

import math

import pandas as pd

from dpvip.plan.transfer_runs import BEST, MAIN_MODEL, TABLE5_MODEL, table5_backbone
from dpvip.report.mehta.notes import chance_notes, shared_stand_in_notes
from dpvip.report.common.paper_values import paper_table
from dpvip.report.common.transfer_cells import Cell, feature_note, selection_notes, study_cells
from dpvip.selection import TEST_LABEL

TITLES = {
    "table1": "Mehta et al. Table 1: DP-SGD with momentum, last layer, per batch size (epsilon 10, delta 1e-6)",
    "table2": "Mehta et al. Table 2: DP-LAMB, last layer, per batch size (epsilon 10, delta 1e-6)",
    "table3": "Mehta et al. Table 3: scaling the model, DP-LAMB at the largest batch",
    "table4": "Mehta et al. Table 4: one hyperparameter changed at a time (DP-LAMB, largest batch)",
    "table5": "Mehta et al. Table 5: one full-batch DP-Adam step of the last layer, per epsilon",
}
NAN = math.nan
IMAGENET = "ImageNet-1k"  # the private set of Tables 1-4


def _model(paper_row: str) -> tuple[str, str]:
    """'ResNet50x4 (BiT) / Last layer' -> ('ResNet50x4', 'Last layer')."""
    model, _, tuning = paper_row.partition(" / ")
    return model.replace(" (BiT)", "").strip(), tuning


def _value(cell: Cell | None) -> float:
    return cell.mean if cell else NAN


def _our_row(paper_row: str, models: dict) -> str | None:
    model, tuning = _model(paper_row)
    return f"{model} / Last layer" if tuning == "Last layer" and model in models else None


def _side_by_side(paper: pd.DataFrame, cells: dict, models: dict) -> pd.DataFrame:
    rows = []
    for paper_row in paper.index:
        ours = _our_row(paper_row, models)
        row = {"Model / Tuning type": paper_row, "stand-in": models[_model(paper_row)[0]] if ours else ""}
        for column in paper.columns:
            row[f"{column} (paper)"] = paper.loc[paper_row, column]
            row[f"{column} (ours)"] = _value(cells.get((ours, column))) if ours else NAN
        rows.append(row)
    return pd.DataFrame(rows)


def _table3(paper: pd.DataFrame, cells: dict) -> pd.DataFrame:
    frame = _side_by_side(paper, cells, {})
    ours = sorted({row for row, _ in cells})
    extra = []
    for our_row in ours:
        row = {"Model / Tuning type": our_row, "stand-in": our_row.removeprefix("Ours: ").split(" / ")[0]}
        for column in paper.columns:
            row[f"{column} (paper)"] = NAN
            row[f"{column} (ours)"] = _value(cells.get((our_row, column)))
        extra.append(row)
    return pd.concat([frame, pd.DataFrame(extra)], ignore_index=True)


def _table4(paper: pd.DataFrame, cells: dict) -> pd.DataFrame:
    base = _value(cells.get(("No change", "Accuracy")))
    rows = []
    for change in paper.index:
        ours = _value(cells.get((change, "Accuracy")))
        rows.append(
            {
                "Change": change,
                "Accuracy (paper)": paper.loc[change].get("Accuracy", NAN),
                "Delta (paper)": paper.loc[change].get("Delta", NAN),
                "Accuracy (ours)": ours,
                "Delta (ours)": NAN if change == "No change" else ours - base,
                "lr (ours)": cells[(change, "Accuracy")].lr if (change, "Accuracy") in cells else NAN,
            }
        )
    return pd.DataFrame(rows)


def _table5(paper: pd.DataFrame, cells: dict) -> pd.DataFrame:
    rows = []
    for dataset in paper.index:
        row = {"Finetuning Dataset": dataset}
        for column in paper.columns:
            row[f"{column} (paper)"] = paper.loc[dataset, column]
            row[f"{column} (ours)"] = _value(cells.get((dataset, column)))
        rows.append(row)
    return pd.DataFrame(rows)


def _privacy_note(cells: dict) -> str:
    sigmas = {}
    for (row, column), cell in sorted(cells.items()):
        privacy = cell.privacy
        if privacy:
            # One sigma per mechanism: (q, T) alone would keep only the last of several budgets (Table 5's).
            key = (
                cell.settings["batch_fraction"],
                privacy["planned_steps"],
                cell.settings["epsilon"],
                privacy["delta"],
            )
            sigmas[key] = (privacy["noise_multiplier"], privacy["epsilon_spent"], privacy["accountant"])
    parts = [
        f"q {q:g}, T {t}: sigma {s:.3g} (epsilon {e:.3g} at delta {d:.1e}, {a})"
        for (q, t, _, d), (s, e, a) in sorted(sigmas.items())
    ]
    return "Noise, calibrated before training: " + "; ".join(parts) if parts else "No private run."


def _lr_note(cells: dict) -> str:
    chosen = sorted({f"{cell.settings['optimizer']} {cell.lr:g}" for cell in cells.values()})
    seeds = "/".join(map(str, sorted({cell.seeds for cell in cells.values()})))
    if any(cell.selection == "validation" for cell in cells.values()):
        how = (
            f"the learning rate of the grid with the best mean validation accuracy over {seeds} seeds (a share "
            "of the training split held out, every head trained on the rest), and its mean test accuracy"
        )
    else:
        how = (
            f"the best learning rate of the grid by mean test accuracy over {seeds} seeds, as the paper tuned it: "
            f"{TEST_LABEL}"
        )
    return f"Each cell: {how} (the pick is not accounted for in one run's epsilon); chosen: {', '.join(chosen)}."


def _not_reproduced(paper: pd.DataFrame, models: dict) -> list[str]:
    notes = []
    if any(_model(r)[1] == "Full" for r in paper.index):
        notes.append(
            "Full fine-tuning rows keep the paper's value only: this stage trains the last layer on cached features "
            "(ViP's DP fine-tuning of a whole encoder is in vip_table5)."
        )
    missing = sorted({_model(r)[0] for r in paper.index if _model(r)[1] == "Last layer" and _model(r)[0] not in models})
    if missing:
        notes.append(
            f"No stand-in for {', '.join(missing)}: the paper's JFT-300M/JFT-4B networks are not public "
            "and no network here plays their part; their rows keep the paper's value."
        )
    return notes


def _stand_ins(table: str, paper: pd.DataFrame, mehta: dict, models: dict) -> tuple[dict, dict]:
    """(models, datasets) of the rows `table` shows: paper name -> our stand-in."""
    imagenet = {IMAGENET: mehta["datasets"][IMAGENET]}
    if table in ("table1", "table2"):
        shown = {_model(r)[0] for r in paper.index}
        return {model: backbone for model, backbone in models.items() if model in shown}, imagenet
    if table == "table3":  # our backbones are rows of their own ('Ours: ...'), a note says so
        return {}, imagenet
    if table == "table4":
        return {f"{MAIN_MODEL} (the main network)": mehta["main"]}, imagenet
    model = f"{TABLE5_MODEL} (ImageNet-21k)"
    return {model: table5_backbone(mehta)}, {d: mehta["datasets"][d] for d in paper.index}


def _stand_in_notes(shown_models: dict, shown_datasets: dict) -> list[str]:
    pairs = [f"{name} -> {ours}" for name, ours in (shown_models | shown_datasets).items()]
    return [
        f"Stand-ins: {', '.join(pairs)}.",
        *shared_stand_in_notes(shown_models, "model"),
        *shared_stand_in_notes(shown_datasets, "dataset"),
    ]


def _batch_notes(table: str, paper: pd.DataFrame, mehta: dict) -> list[str]:
    """What the batch sizes are, where the table has batch columns (Tables 1-3) or one batch (Table 4)."""
    batches = mehta["batch_sizes"]
    largest = max(batches, key=batches.get)
    if table == "table4":
        return [
            f"Every row at the largest batch: {largest} -> {batches[largest]:g} of n (2^20 of ImageNet's 1,281,167)."
        ]
    if table == "table5":  # one full-batch step: the privacy note gives q = 1
        return []
    note = (
        f"Batch sizes are fractions of n: {', '.join(f'{k} -> {v:g}' for k, v in batches.items())} "
        "(2^k of ImageNet's 1,281,167)"
    )
    if any(column.endswith(BEST) for column in paper.columns):
        note += f"; 'Best' is momentum SGD without privacy at {mehta['best']['batch_fraction']:g} of n"
    return [note + "."]


def _table_notes(table: str, mehta: dict, section: dict) -> list[str]:
    if table == "table3":
        return [
            "The paper's larger networks have no stand-in here; the 'Ours:' rows are every backbone of this workflow "
            "at the largest batch, so the table still shows how our backbones compare."
        ]
    if table == "table4":
        return [
            f"Resolution rows: the paper's {mehta['table4']['paper_resolution']} px "
            f"is our {section['backbones'][mehta['main']]['image_size']} px; "
            + ", ".join(f"{k} -> {v} px" for k, v in mehta["table4"]["resolutions"].items())
            + ". The paper prints 'Random Chance' for the LeCun normal initialisation.",
            f"Epochs row: the paper's base trains 10 epochs, ours {mehta['epochs']:g}, "
            f"so '10 epochs -> 1 epochs' is {mehta['epochs']:g} -> 1 here.",
        ]
    return []


def mehta_table(
    table: str, results: dict, values: pd.DataFrame, section: dict, scale: str
) -> tuple[pd.DataFrame, str, list[str]]:
    """(frame, title, notes) of Mehta et al.'s `table` from its study's result file."""
    paper = paper_table(values, "mehta", table)
    cells = study_cells(results)
    mehta = section["mehta"]
    models = {k: v for k, v in mehta["models"].items() if v is not None}
    if table in ("table1", "table2"):
        frame = _side_by_side(paper, cells, models)
    elif table == "table3":
        frame = _table3(paper, cells)
    elif table == "table4":
        frame = _table4(paper, cells)
    else:
        frame = _table5(paper, cells)
    shown_models, shown_datasets = _stand_ins(table, paper, mehta, models)
    notes = [
        f"Scale: {scale}. Ours: a linear head (zero init, bias -10 fixed, sigmoid cross-entropy, "
        f"clip {mehta['clip_norm']:g}) trained on cached features of a frozen backbone.",
        *_stand_in_notes(shown_models, shown_datasets),
        *_batch_notes(table, paper, mehta),
        _lr_note(cells),
        *selection_notes(results),
        _privacy_note(cells),
        feature_note(results),
        *_not_reproduced(paper, models),
        *_table_notes(table, mehta, section),
        *chance_notes(cells, results, section, shown_datasets),
    ]
    return frame, TITLES[table], notes
