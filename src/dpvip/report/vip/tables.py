"""ViP's result tables (1, 2, 4-11): every printed row and column with the paper's value
beside ours, our extra rows (other sizes, other ablation points) after them.

Our values come from the evaluation results (`columns` of each results/evaluate JSON) and
from the DP runs' own facts (batch size, dataset size, sigma, decoder depth, mask ratio,
parameters). A cell we do not reproduce stays empty beside the paper's value.
"""

from __future__ import annotations

import math

import pandas as pd

from dpvip.report.common.paper_values import paper_table
from dpvip.selection import selection_note
from dpvip.plan.vip_rows import Row
from dpvip.plan.vip_runs import DPRun

TITLES = {
    "vip_table1": "ViP Table 1: linear probing (top-1 %)",
    "vip_table2": "ViP Table 2: few-shot fine-tuning (top-1 %)",
    "vip_table4": "ViP Table 4: COCO detection / segmentation (AP) and ADE20K (mIoU)",
    "vip_table5": "ViP Table 5: DP fine-tuning on ImageNet-1K (top-1 %, (ε, δ) w.r.t. the downstream set)",
    "vip_table6": "ViP Table 6: linear probing against non-private MAE (top-1 %)",
    "vip_table7": "ViP Table 7: few-shot fine-tuning against non-private MAE (top-1 %)",
    "vip_table8": "ViP Table 8: ImageNet-1K linear probing of ViP at other privacy budgets (top-1 %)",
    "vip_table9": "ViP Table 9: model size (top-1 %)",
    "vip_table10": "ViP Table 10: dataset size and batch size (top-1 %)",
    "vip_table11": "ViP Table 11: decoder depth and masking ratio (ImageNet-1K linear probing, top-1 %)",
}


SAMPLES = "# pre-train samples"  # Table 1's column, in millions as the paper prints it


def sample_count(millions: float) -> str:
    """A number of samples with its unit: '1.28M', '233M'; under a million the exact count
    ('2,048'), which '0.002' would hide. NaN (no value) stays empty."""
    if math.isnan(millions):
        return ""
    if millions >= 1:
        return f"{millions:.3g}M"
    return f"{round(millions * 1e6):,}"


def ours_by_backbone(results: list[dict]) -> dict[str, dict[str, float]]:
    """{backbone: {column: value}} merged over the evaluation results (their units are the
    paper's: accuracy in %, COCO AP and mIoU in points)."""
    merged: dict[str, dict[str, float]] = {}
    for result in results:
        merged.setdefault(result["evaluation"]["backbone"], {}).update(result["columns"])
    return merged


def run_facts(
    runs: dict[str, DPRun],
    privacy: dict[str, dict],
    parameters: dict[str, float],
    synthetic_images: dict[str, int] | None = None,
) -> dict[str, dict[str, float]]:
    """Tables 1 and 9-11's descriptive columns of each DP run, from its ledger and settings;
    `parameters` ({backbone: millions}) fills '# parameters', `synthetic_images` ({(Syn)-ViP
    backbone: images it was pre-trained on}) their '# pre-train samples'."""
    from dpvip.models import mae_size, mae_variant

    facts: dict[str, dict[str, float]] = {name: {"# parameters": millions} for name, millions in parameters.items()}
    for name, images in (synthetic_images or {}).items():
        facts.setdefault(name, {})[SAMPLES] = images / 1e6  # the paper counts millions
    for name, ledger in privacy.items():
        run = runs[name]
        size, depth = mae_variant(run.model)
        n = ledger["examples"]
        facts.setdefault(name, {}).update(
            {
                "Batch Size": round(ledger["sample_rate"] * n),
                "# Train data": n / 1e6,  # the paper counts millions
                SAMPLES: n / 1e6,  # ViP's pre-training data is the private set (the (Syn)-ViP init aside)
                "Noise sigma": ledger["noise_multiplier"],
                "decoder depth": depth or mae_size(size).decoder_depth,
                "masking ratio": run.values.get("mask_ratio", 0.75),
            }
        )
    return facts


def vip_table(table: str, values: pd.DataFrame, rows: list[Row], ours: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Paper rows in the paper's order (ours beside them where a row of ours matches), then
    our rows the paper does not have. Columns: model, our run, then '<column> (paper)' and
    '<column> (ours)' for each printed column."""
    printed = paper_table(values, "vip", table.removeprefix("vip_"))
    columns = list(printed.columns)
    mine = {row.label: row for row in rows}
    out = []
    for label in [*printed.index, *(label for label in mine if label not in printed.index)]:
        row = mine.get(label)
        backbones = sorted({backbone for backbone, _ in row.cells.values()}) if row else []
        record = {"model": label, "our run": ", ".join(backbones) or "—"}
        for column in columns:
            record[f"{column} (paper)"] = printed.at[label, column] if label in printed.index else math.nan
            cell = row.cells.get(column) if row else None
            record[f"{column} (ours)"] = ours.get(cell[0], {}).get(cell[1], math.nan) if cell else math.nan
        out.append(record)
    frame = pd.DataFrame(out)
    for side in ("paper", "ours"):  # counts as text with their unit: a bare 1 hides "million"
        if f"{SAMPLES} ({side})" in frame.columns:
            frame[f"{SAMPLES} ({side})"] = frame[f"{SAMPLES} ({side})"].map(sample_count)
    return frame


# The tasks whose result is the chosen point of a hyperparameter grid (`best_of_grid`).
GRID_TASKS = {"linear_probe": ("Linear probing", "base learning rate"), "few_shot": ("Few-shot", "learning rate")}


def selection_notes(results: list[dict]) -> list[str]:
    """How each grid task's hyperparameter was chosen (`dpvip.selection`): on a validation
    split held out of the training data, or on test accuracy, labelled as the paper's
    practice and optimistic. A result that records no selection is an older one, chosen on test."""
    notes = set()
    for result in results:
        task = result.get("evaluation", {}).get("task")
        if task in GRID_TASKS and "grid" in result:
            name, what = GRID_TASKS[task]
            recorded = result.get("selection") or result["grid"].get("selection")
            notes.add(f"{name}: {selection_note(recorded, what)}.")
    return sorted(notes)


def stand_in_notes(results: list[dict], scale: str) -> list[str]:
    """The scale, and which data each evaluated dataset was (the stand-ins named)."""
    notes = [
        f"Scale: {scale}. '(ours)' is this workflow's run; an empty cell is not reproduced "
        "at this scale or by this workflow."
    ]
    seen = {}
    for result in results:
        evaluation, data = result["evaluation"], result.get("data", {})
        name = evaluation.get("dataset") or {"coco": "COCO 2017", "ade20k": "ADE20K"}.get(evaluation["task"])
        if name and name not in seen:
            seen[name] = (
                f"{name}: {data['stand_in']} stands in ({data.get('train', '?')} train / {data.get('test', '?')} test)"
                if data.get("stand_in")
                else f"{name}: the configured data ({data.get('train', '?')} train / {data.get('test', '?')} test)"
            )
    return notes + sorted(seen.values())
