"""DP-RandP's result tables (1, 2, 3, 6, 10, 11, 12, 16, 24, 25): every printed row in the
paper's order with the paper's value beside ours, our extra rows and columns after (a column
the paper does not print has no '(paper)' twin). Notes say the chance level of the data, which
of our cells sit at or near it, and where the paper prints another number elsewhere for a
cell it shows.

Our value of a cell is the mean over seeds of its runs' accuracy (the EMA model's, as
DP-RandP reports; validation for Table 3), with the sample std beside it where the paper
prints one. `results` maps `PrivateRun.path` to its result JSON; a run without a result
leaves its cell to the others (or empty). The helpers here (`accuracy`, `mean_std`,
`stand_in_notes`) are shared with the DP-RandP figures and claims.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpvip.plan.dprandp_runs import (
    MAIN_TASK,
    DPRandPPlan,
    PrivateRun,
    epsilon_label,
    parse_epsilon,
)
from dpvip.plan.dprandp_rows import RunRow, runs_of, table12_models, table_rows
from dpvip.report.claims.chance import Chance, chance_note, classes_of, flag_notes
from dpvip.report.dprandp.conflicts import conflict_notes
from dpvip.report.common.paper_values import paper_table

TITLES = {
    "dprandp_table1": "DP-RandP Table 1: CIFAR-10 test accuracy (%) against previous work, (ε, 1e-5)-DP",
    "dprandp_table2": "DP-RandP Table 2: CIFAR-100 test accuracy (%)",
    "dprandp_table3": "DP-RandP Table 3: DermaMNIST validation accuracy (%)",
    "dprandp_table6": (
        "DP-RandP Table 6: DP-RandP w/o Phase II (warm start, all steps in Phase III), CIFAR-10 test accuracy (%)"
    ),
    "dprandp_table10": (
        "DP-RandP Table 10: private linear probing on features learnt from different synthetic images, CIFAR-10 (%)"
    ),
    "dprandp_table11": "DP-RandP Table 11: representation learning method of Phase I, CIFAR-10 test accuracy (%)",
    "dprandp_table12": "DP-RandP Table 12: model size, CIFAR-10 test accuracy (%)",
    "dprandp_table16": "DP-RandP Table 16: DermaMNIST test accuracy (%)",
    "dprandp_table24": "DP-RandP Table 24: the importance of the phases, CIFAR-10 test accuracy (%)",
    "dprandp_table25": "DP-RandP Table 25: two-stage training from random initialisation, CIFAR-10 test accuracy (%)",
}
TABLE_TASK = {
    "table1": "CIFAR-10",
    "table2": "CIFAR-100",
    "table3": "DermaMNIST",
    "table16": "DermaMNIST",
}  # others: MAIN_TASK
HYPERPARAMETERS = {"CIFAR-10": "table13", "CIFAR-100": "table14", "DermaMNIST": "table15"}
PAPER_BATCH = {"CIFAR-10": 4096, "CIFAR-100": 4096, "DermaMNIST": 1024}
PAPER_AUGMULT = 16
PAPER_MODEL = "WRN-16-4 (Phase I: Wang and Isola's alignment + uniformity loss on 105k StyleGAN-Oriented images)"
NOT_REPRODUCED = {
    "table1": (
        "Tramèr and Boneh [61] (a CNN on ScatterNet features) and Hölzl et al. [35] are other works' methods, "
        "whose published numbers the paper quotes"
    ),
    "table3": "the Hölzl et al. [34] rows are another work's published numbers",
    "table10": (
        "the paper linearly probes the small-AlexNet checkpoints of Baradad et al. [5] "
        "trained on each synthetic set; we probe our WRN trained (Phase I) on our own generators, "
        "and have none for the other sets"
    ),
    "table25": "our sweep's Phase II lengths are other numbers of epochs than the paper's",
}
EPOCHS = "Epochs for Phase II"


# --- values of runs (shared with the figures and claims) -------------------------------------
def read_results(runs: list[str], paths: list[str]) -> dict[str, dict]:
    """{run path: result} from the result files of `runs` (in the same order)."""
    import json
    from pathlib import Path

    return {run: json.loads(Path(path).read_text()) for run, path in zip(runs, paths, strict=True)}


def accuracy(result: dict, metric: str = "test") -> float:
    value = result["accuracy"].get(metric)
    return math.nan if value is None else float(value)


def run_values(runs: list[PrivateRun], results: dict[str, dict], metric: str = "test") -> list[float]:
    """The runs' accuracies, skipping runs without a result (or without that metric)."""
    values = [accuracy(results[run.path], metric) for run in runs if run.path in results]
    return [v for v in values if not math.isnan(v)]


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample std (ddof=1); NaN where there are too few values."""
    mean = float(np.mean(values)) if values else math.nan
    return mean, float(np.std(values, ddof=1)) if len(values) > 1 else math.nan


def number(value: float) -> str:
    """1.0 -> '1', 0.396 -> '0.4' (one decimal, integral shown whole)."""
    return f"{round(value, 1):g}"


def epochs(phase2_steps: int, result: dict) -> float:
    """Phase II steps as epochs of the run's own data (expected batch over examples)."""
    examples = result["privacy"].get("examples") or result["data"]["train"]
    return round(phase2_steps * result["batch_size"] / examples, 1)


def stand_in_notes(results: dict[str, dict]) -> list[str]:
    """One note per task the results ran on: the stand-in data (or the configured data)."""
    seen = {}
    for result in results.values():
        task, data = result["run"]["task"], result.get("data", {})
        sizes = " / ".join(f"{data[k]} {k}" for k in ("train", "test", "validation") if data.get(k) is not None)
        what = f"{data['stand_in']} stands in" if data.get("stand_in") else "the configured data"
        seen.setdefault(task, f"{task}: {what} ({sizes})")
    return sorted(seen.values())


def stand_in_text(results: dict[str, dict], task: str = "CIFAR-10") -> str:
    """'<stand-in> stands in for <task>' (for figure titles), or the task where the data is real."""
    names = sorted({r.get("data", {}).get("stand_in") or task for r in results.values()})
    return f"{', '.join(names)} stands in for {task}" if names and names != [task] else task


# --- table cells ------------------------------------------------------------------------------
def row_cells(row: RunRow, results: dict[str, dict]) -> dict[str, list[float]]:
    """{column: accuracies} of one row; sweep columns become '<EPOCHS>=<e>' per run."""
    cells: dict[str, list[float]] = {}
    for key, runs in row.cells.items():
        if not row.sweep:
            cells[key] = []  # the column stands even before its runs have results
        for run in (run for run in runs if run.path in results):
            column = f"{EPOCHS}={number(epochs(run.phase2_steps, results[run.path]))}" if row.sweep else key
            cells.setdefault(column, []).extend(run_values([run], results, row.metric))
    return cells


def describe(row: RunRow | None) -> str:
    if row is None:
        return "—"
    runs = runs_of([row])
    inits = ", ".join(dict.fromkeys(f"{r.init} ({r.model})" if r.warm else f"random init ({r.model})" for r in runs))
    phase2 = "/".join(str(p) for p in sorted({r.phase2_steps for r in runs}))
    seeds = ",".join(str(s) for s in sorted({r.seed for r in runs}))
    return f"{inits}; Phase II steps {phase2}; seeds {seeds}"


def _ordered(columns: list[str]) -> list[str]:
    """Epsilon columns by epsilon (as printed: 1, 2, ..., inf); others as they come."""
    if columns and all(c.startswith("epsilon=") for c in columns):
        return sorted(columns, key=lambda c: parse_epsilon(c.removeprefix("epsilon=")))
    return columns


def _paper(printed: pd.DataFrame, label: str, column: str) -> float:
    if label in printed.index and column in printed.columns:
        return float(printed.at[label, column])
    return math.nan


def dprandp_table(
    table: str, plan: DPRandPPlan, results: dict[str, dict], paper_values: pd.DataFrame, scale: str = "embedded"
) -> tuple[pd.DataFrame, str, list[str]]:
    """(frame, title, notes) of one table ('table1' or 'dprandp_table1')."""
    name = table.removeprefix("dprandp_")
    printed = paper_table(paper_values, "dprandp", name)
    rows = {row.label: row for row in table_rows(plan, name)}
    ours = {label: row_cells(row, results) for label, row in rows.items()}
    paper_columns = _ordered([c for c in printed.columns if not c.endswith(" std")])
    extra = _ordered(list(dict.fromkeys(c for cells in ours.values() for c in cells if c not in paper_columns)))
    prints_std = len(paper_columns) < len(printed.columns)
    with_std = {c for c in paper_columns if f"{c} std" in printed.columns} | (set(extra) if prints_std else set())
    records = []
    for label in [*printed.index, *(label for label in rows if label not in printed.index)]:
        record = {"row": label, "our runs": describe(rows.get(label))}
        for column in [*paper_columns, *extra]:
            mean, std = mean_std(ours.get(label, {}).get(column, []))
            if column in paper_columns:  # a column only we run has no paper twin
                record[f"{column} (paper)"] = _paper(printed, label, column)
            if f"{column} std" in printed.columns:
                record[f"{column} std (paper)"] = _paper(printed, label, f"{column} std")
            record[f"{column} (ours)"] = mean
            if column in with_std:
                record[f"{column} std (ours)"] = std
        records.append(record)
    frame = pd.DataFrame(records)
    notes = table_notes(name, plan, list(rows.values()), results, paper_values, scale, frame, paper_columns)
    return frame, TITLES[f"dprandp_{name}"], notes


# --- notes ------------------------------------------------------------------------------------
def table_notes(
    name: str,
    plan: DPRandPPlan,
    rows: list[RunRow],
    results: dict[str, dict],
    paper_values: pd.DataFrame,
    scale: str,
    frame: pd.DataFrame,
    paper_columns: list[str],
) -> list[str]:
    task = TABLE_TASK.get(name, MAIN_TASK)
    metric = rows[0].metric if rows else "test"
    scale_note = (
        f"Scale: {scale}. '(ours)' is the mean over seeds of the {metric} accuracy (%) of our runs' EMA model, "
        "'std (ours)' the sample std (ddof=1; empty for one seed); "
        "'(paper)' is the paper's printed value (a column the paper does not print has none); "
        "an empty cell is not reproduced."
    )
    notes = [scale_note]
    notes += stand_in_notes(results)
    notes += chance_notes(task, metric, results, frame)
    notes += conflict_notes(paper_values, {(name, row) for row in frame["row"]})
    if task in plan.tasks and plan.source_task(task) != task:
        notes.append(
            f"{task} is shown with {plan.source_task(task)}'s runs (dprandp.private.tasks.{task}.runs_of): "
            "the same stand-in data and schedule."
        )
    notes.append(model_note(name, plan))
    runs = runs_of(rows)
    notes += schedule_notes(task, runs, results, paper_values)
    missing = sum(run.path not in results for run in dict.fromkeys(runs))
    if missing:
        notes.append(f"{missing} of {len(set(runs))} runs have no result yet; their cells use the seeds that do.")
    if any(row.sweep for row in rows):
        notes.append(sweep_note(runs, results))
    notes += missing_notes(name, frame, paper_columns, runs)
    return notes


def run_chances(task: str, metric: str, results: dict[str, dict]) -> set[Chance]:
    """The chance level of each data set the results were evaluated on (the `metric` split):
    a stand-in is described as standing in for `task`, the table's (CIFAR-100 may show
    CIFAR-10's runs), real data by the runs' own task."""
    found = set()
    for result in results.values():
        data, run_task = result.get("data", {}), result["run"]["task"]
        classes = classes_of(run_task, data.get("classes"), data.get("stand_in"))
        if classes:
            what = f"{data['stand_in']} (standing in for {task})" if data.get("stand_in") else run_task
            found.add(Chance(classes, data.get(metric), what))
    return found


def chance_notes(task: str, metric: str, results: dict[str, dict], frame: pd.DataFrame) -> list[str]:
    """The chance level of the table's data, and our cells at or near it."""
    chances = run_chances(task, metric, results)
    notes = [chance_note(chance) for chance in sorted(chances, key=lambda c: c.data)]
    if len(chances) == 1:
        cells = {
            f"{record['row']}, {column.removesuffix(' (ours)')}": value
            for record in frame.to_dict("records")
            for column, value in record.items()
            if column.endswith(" (ours)") and " std " not in column
        }
        notes += flag_notes(cells, chances.pop())
    return notes


def model_note(name: str, plan: DPRandPPlan) -> str:
    note = f"Model: ours {plan.model} (Phase I: {plan.method} on our {plan.dataset} images); the paper's {PAPER_MODEL}."
    if name == "table12":
        note += (
            " Table 12: "
            + "; ".join(f"our {ours} stands in for {paper}" for paper, ours in table12_models(plan).items())
            + "."
        )
    if name == "table10":
        note += (
            " Table 10's cells are Phase II only (private linear probing for all the steps) "
            "from a Phase I on each of our synthetic sets; the paper's: 100 steps of linear probing at ε = 1."
        )
    return note


def _unique(values, digits: int = 3) -> str:
    kept = sorted({float(f"{v:.{digits}g}") for v in values if v is not None})
    return "/".join(f"{v:g}" for v in kept) or "?"


def schedule_notes(
    task: str, runs: list[PrivateRun], results: dict[str, dict], paper_values: pd.DataFrame
) -> list[str]:
    """Batch size, augmult, and per epsilon our steps and sigma beside the paper's (Tables 13-15)."""
    done = [(run, results[run.path]) for run in dict.fromkeys(runs) if run.path in results]
    if not done:
        return []
    hyper = paper_table(paper_values, "dprandp", HYPERPARAMETERS[task])
    accountants = ", ".join(sorted({r["privacy"]["accountant"] for _, r in done}))
    settings = (
        f"Batch size {_unique(r['batch_size'] for _, r in done)} (paper {PAPER_BATCH[task]}), "
        f"augmult {_unique(r['augmult'] for _, r in done)} (paper {PAPER_AUGMULT}); "
        f"accountant {accountants}, δ {_unique(r['privacy']['delta'] for _, r in done)}."
    )
    notes = [settings]
    for epsilon in sorted({run.epsilon for run, _ in done}):
        at = [(run, r) for run, r in done if run.epsilon == epsilon]
        column = f"epsilon={epsilon_label(epsilon)}"
        sigma = (
            "no noise (σ 0)"
            if math.isinf(epsilon)
            else (
                f"σ {_unique(r['privacy']['noise_multiplier'] for _, r in at)} "
                f"(sample rate {_unique(r['privacy']['sample_rate'] for _, r in at)})"
            )
        )
        ours = (
            f"ours {_unique(r['steps'] for _, r in at)} steps "
            f"(Phase II: {_unique(run.phase2_steps for run, _ in at)}), {sigma}"
        )
        if column in hyper.columns:
            paper = (
                f"{hyper.at['Total Steps', column]:g} steps "
                f"(Phase II: {hyper.at['Steps in Phase II', column]:g}), σ {hyper.at['σ', column]:g}"
            )
        else:
            paper = "not listed"
        notes.append(
            (
                f"ε = {epsilon_label(epsilon)}: {ours}; "
                f"paper ({HYPERPARAMETERS[task].replace('table', 'Table ')}) {paper}."
            )
        )
    return notes


def sweep_note(runs: list[PrivateRun], results: dict[str, dict]) -> str:
    pairs = sorted(
        {
            (run.phase2_steps, epochs(run.phase2_steps, results[run.path]), results[run.path]["steps"])
            for run in runs
            if run.path in results
        }
    )
    shown = ", ".join(f"{p} steps → {number(e)}" for p, e, _ in pairs)
    whole = [f"{number(e)} ({p} steps)" for p, e, total in pairs if p == total]
    return (
        f"{EPOCHS} = Phase II steps × batch size / training examples of our runs, to 0.1 ({shown}). "
        "The paper's last column (73) is all of its 875 steps in Phase II"
        f"{'; ours with all the steps in Phase II is ' + whole[0] if whole else ''}."
    )


def missing_notes(name: str, frame: pd.DataFrame, paper_columns: list[str], runs: list[PrivateRun]) -> list[str]:
    """Which paper rows and columns have no value of ours, and why."""
    ours = frame[[c for c in frame.columns if c.endswith(" (ours)") and " std " not in c]]
    paper = frame[[c for c in frame.columns if c.endswith(" (paper)")]]
    printed = paper.notna().any(axis=1)
    empty_rows = list(frame.loc[printed & ours.isna().all(axis=1), "row"])
    empty_columns = [c for c in paper_columns if ours[f"{c} (ours)"].isna().all()]
    if not empty_rows and not empty_columns:
        return []
    parts = []
    if empty_rows:
        parts.append(f"rows {', '.join(empty_rows)}")
    if empty_columns:
        why = ""
        if all(c.startswith("epsilon=") for c in empty_columns):
            why = (
                f" (our runs here are at ε = {', '.join(epsilon_label(e) for e in sorted({r.epsilon for r in runs}))})"
            )
        parts.append(f"columns {', '.join(empty_columns)}{why}")
    reason = NOT_REPRODUCED.get(
        name,
        "outside our configured runs (dprandp.private.tasks and dprandp.ablations); "
        "runs without a result also stay empty",
    )
    return [f"Rows/columns without ours are not reproduced: {'; '.join(parts)} — {reason}."]
