"""What a reader needs to read the ViP tables right: units, chance levels, rows filled by
something other than what their label names, and results that say nothing (constant
predictions, accuracy at chance). Everything is read from the evaluation results."""

from __future__ import annotations

import math

import pandas as pd

from dpvip.report.claims.chance import Chance, flag_notes, recorded_chance

# COCO AP in points (0-100), as the papers print it: the evaluation stores it so
# (`dpvip.evaluate.coco_instances.coco_scores`, detectron2's metrics), and nothing converts it again
AP_COLUMNS = ("COCO AP box", "COCO AP mask")


def chance(result: dict) -> Chance | None:
    """The chance level of a classification result, from the data it ran on."""
    data, dataset = result.get("data", {}), result["evaluation"].get("dataset") or ""
    return recorded_chance(dataset, data, data.get("stand_in"), data.get("stand_in") or dataset)


def random_baselines(results: list[dict]) -> dict[str, str]:
    """{backbone: arch} of the CNN baselines trained from random initialisation."""
    return {
        r["evaluation"]["backbone"]: r["grid"].get("arch", "CNN")
        for r in results
        if r.get("grid", {}).get("init") == "random"
    }


def label_random_baselines(frame: pd.DataFrame, results: list[dict]) -> pd.DataFrame:
    """'our run' says it when a row's network was not pre-trained (SimCLR's row, offline)."""
    random = random_baselines(results)
    frame = frame.copy()
    frame["our run"] = [
        f"{run} (random init: not {model})" if run in random else run
        for run, model in zip(frame["our run"], frame["model"])
    ]
    return frame


TRIVIAL_ROW = "Trivial baseline"
TRIVIAL_RUN = "none: knows no image"


def trivial_baselines(results: list[dict], columns: list[str]) -> dict[str, tuple[float, str]]:
    """{column: (value, rule)} of the trivial predictors the dense evaluations score beside
    their own (`trivial` of a COCO or ADE20K result): the first result's, since every
    backbone is scored on the same test set."""
    found: dict[str, tuple[float, str]] = {}
    for result in results:
        trivial = result.get("trivial") or {}
        for column, value in trivial.get("columns", {}).items():
            if column in columns and value is not None:
                found.setdefault(column, (value, trivial["rule"]))
    return found


def with_trivial_row(frame: pd.DataFrame, results: list[dict], columns: list[str]) -> pd.DataFrame:
    """The table with a last row holding the trivial predictors' scores in the (ours) cells of
    the dense columns: what a detector or segmenter that learnt nothing scores."""
    found = trivial_baselines(results, columns)
    if not found:
        return frame
    row = {column: math.nan for column in frame.columns} | {"model": TRIVIAL_ROW, "our run": TRIVIAL_RUN}
    row |= {f"{column} (ours)": value for column, (value, _) in found.items()}
    return pd.concat([frame, pd.DataFrame([row])], ignore_index=True)


def trivial_notes(results: list[dict], columns: list[str]) -> list[str]:
    rules = {}
    for column, (value, rule) in trivial_baselines(results, columns).items():
        rules.setdefault(rule, []).append(f"{column} {value:.2f}")
    return [
        f"{TRIVIAL_ROW} (last row): {rule}: {', '.join(scores)}. A result at or below it learnt nothing."
        for rule, scores in rules.items()
    ]


def reading_notes(results: list[dict], columns: list[str]) -> list[str]:
    """Units, chance levels, random-init baselines and degenerate results of one table."""
    notes = []
    if any(c in AP_COLUMNS for c in columns):
        notes.append("Units: COCO AP in points (0-100) as the paper prints it.")
    if "ADE20K mIoU" in columns:
        notes.append("Units: ADE20K mIoU in %.")
    if "# pre-train samples" in columns:
        notes.append(
            "Units: '# pre-train samples' with its unit (M: millions, as the paper prints it); ours under a "
            "million as the exact count of images our run was pre-trained on."
        )
    levels = {}
    for result in results:
        level, dataset = chance(result), result["evaluation"].get("dataset")
        if level is not None and dataset and set(result["columns"]) & set(columns):
            levels[dataset] = f"{dataset} {level.level:g}% ({level.classes} classes of {level.data})"
    if levels:
        notes.append("Chance level (1 / classes): " + "; ".join(sorted(levels.values())) + ".")
    for backbone, arch in sorted(random_baselines(results).items()):
        notes.append(
            f"{backbone} is a {arch} from random initialisation, in the row of a pre-trained baseline whose "
            "weights are not available offline: it is not that model."
        )
    notes += trivial_notes(results, columns) + _degenerate(results, columns)
    notes += [
        f"{result['evaluation']['task']} of {result['evaluation']['backbone']}: its cells are empty because "
        f"{result['data']['undefined']}"
        for result in results
        if result.get("data", {}).get("undefined") and set(result["columns"]) & set(columns)
    ]
    return notes


def _degenerate(results: list[dict], columns: list[str]) -> list[str]:
    found = []
    for result in results:
        evaluation, backbone = result["evaluation"], result["evaluation"]["backbone"]
        per_class = result.get("scores", {}).get("per_class")
        if per_class and "ADE20K mIoU" in columns and all(iou == 0 for iou in per_class[1:]):
            found.append(
                f"Degenerate: {backbone}'s segmentation predicts the background only (IoU 0 on every object "
                f"class); its mIoU {result['columns'].get('ADE20K mIoU', math.nan):.2f} is the background's IoU "
                f"over {len(per_class)} classes."
            )
        level = chance(result)
        cells = {
            f"{backbone} {column} ({evaluation['task']})": value
            for column, value in result["columns"].items()
            if column in columns and column not in ("epsilon", "delta") and value is not None
        }
        if level is not None and cells:
            found += flag_notes(cells, level)
    return found
