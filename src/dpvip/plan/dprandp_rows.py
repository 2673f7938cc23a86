"""Which DP-RandP run fills which cell of the paper's tables (torch-free).

A `RunRow` is one printed row: the paper's label (as in config/paper_values/dprandp.csv)
and, per column, the runs (one per seed) whose mean and std fill our cell. Columns are the
paper's (`epsilon=1`, `Untrained StyleGAN / Oriented`, ...); sweep rows (Table 25, Figure 6)
are keyed by Phase II steps and turned into epochs from the runs' own data size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dpvip.plan.dprandp_runs import MAIN_TASK, DPRandPPlan, PrivateRun, epsilon_label

WARM_FULL = "DP-RandP"
WARM_NO_PHASE2 = "DP-RandP w/o Phase II"
COLD_ROW = "Phase III only (De et al. [15])"
PHASE2_ONLY = "Phase II only"  # warm, every step on the head: private linear probing
# Table 10's columns by synthetic family (the paper's other columns have no generator here).
# Shaders is not among the paper's columns: the table marks it ours, as any column it adds.
TABLE10_COLUMNS = {
    "stylegan_oriented": "Untrained StyleGAN / Oriented",
    "dead_leaves": "Dead leaves textures",
    "shaders": "Shaders",
}
METHOD_LABELS = {"align_uniform": "Wang and Isola [64]", "moco": "MoCo [30]"}
PAPER_MODELS = ("WRN-16-4", "WRN-40-4")


@dataclass
class RunRow:
    label: str
    cells: dict[str, list[PrivateRun]] = field(default_factory=dict)
    metric: str = "test"  # or "validation" (DermaMNIST, Table 3)
    sweep: bool = False  # cells keyed by "phase2_steps=<p>" (converted to epochs)


def _by_epsilon(cells: dict[float, list[PrivateRun]]) -> dict[str, list[PrivateRun]]:
    return {f"epsilon={epsilon_label(e)}": runs for e, runs in cells.items()}


def _three_rows(
    plan: DPRandPPlan, task: str, cold_label: str, full_label: str = WARM_FULL, metric: str = "test"
) -> list[RunRow]:
    main = plan.main_init
    return [
        RunRow(cold_label, _by_epsilon(plan.cells(task, None, "none")), metric),
        RunRow(full_label, _by_epsilon(plan.cells(task, main, "schedule")), metric),
    ]


def table_rows(plan: DPRandPPlan, table: str) -> list[RunRow]:
    """The rows of `table` (dprandp_<table> without the prefix) that our runs fill."""
    main, tasks = plan.main_init, plan.tasks
    if table == "table1":
        return _three_rows(plan, "CIFAR-10", "De et al. [15]") if "CIFAR-10" in tasks else []
    if table == "table2":
        return _three_rows(plan, "CIFAR-100", "DP-SGD") if "CIFAR-100" in tasks else []
    if table in ("table3", "table16"):
        if "DermaMNIST" not in tasks:
            return []
        return _three_rows(
            plan, "DermaMNIST", "DP-SGD we evaluated", metric="validation" if table == "table3" else "test"
        )
    if table == "table6":
        return [RunRow("Accuracy(%)", _by_epsilon(plan.cells(MAIN_TASK, main, "none")))]
    if table == "table10":
        return [RunRow("Accuracy", table10_cells(plan))]
    if table == "table11":
        return table11_rows(plan)
    if table == "table12":
        return table12_rows(plan)
    if table == "table24":
        return [
            RunRow(WARM_FULL, _by_epsilon(plan.cells(MAIN_TASK, main, "schedule"))),
            RunRow(WARM_NO_PHASE2, _by_epsilon(plan.cells(MAIN_TASK, main, "none"))),
            RunRow(COLD_ROW, _by_epsilon(plan.cells(MAIN_TASK, None, "none"))),
        ]
    if table == "table25":
        return [
            RunRow(
                "Accuracy (%)",
                {f"phase2_steps={p}": runs for p, runs in plan.sweep_runs("table25", None).items()},
                sweep=True,
            )
        ]
    raise KeyError(table)


def table10_cells(plan: DPRandPPlan) -> dict[str, list[PrivateRun]]:
    epsilon = float(plan.ablations.get("table10_epsilon", 1))
    cells = {}
    for dataset in [plan.dataset, *plan.ablations.get("datasets", [])]:
        init = plan.phase1_run(dataset=dataset)
        column = TABLE10_COLUMNS.get(plan.families.get(dataset, ""), dataset)
        cells[column] = [plan.run(MAIN_TASK, init, epsilon, s, "all") for s in plan.claim_seeds]
    return cells


def table11_rows(plan: DPRandPPlan) -> list[RunRow]:
    epsilons = plan.ablation_epsilons()
    rows = []
    for method in [plan.method, *plan.ablations.get("methods", [])]:
        init = plan.phase1_run(method=method)
        seeds = plan.seeds if method == plan.method else plan.claim_seeds
        label = METHOD_LABELS[method]
        rows.append(
            RunRow(f"{label} / {WARM_FULL}", _by_epsilon(plan.cells(MAIN_TASK, init, "schedule", epsilons, seeds)))
        )
        rows.append(
            RunRow(f"{label} / {WARM_NO_PHASE2}", _by_epsilon(plan.cells(MAIN_TASK, init, "none", epsilons, seeds)))
        )
    rows.append(RunRow(COLD_ROW, _by_epsilon(plan.cells(MAIN_TASK, None, "none", epsilons))))
    return rows


def table12_models(plan: DPRandPPlan) -> dict[str, str]:
    """{paper's model label: our model}: the main model stands in for WRN-16-4, the first
    ablation model for WRN-40-4; further ablation models get rows of their own."""
    models = [plan.model, *plan.ablations.get("models", [])]
    return {PAPER_MODELS[k] if k < len(PAPER_MODELS) else f"{m} (ours)": m for k, m in enumerate(models)}


def table12_rows(plan: DPRandPPlan) -> list[RunRow]:
    epsilons = [e for e in plan.ablation_epsilons() if not math.isinf(e)]  # the paper's Table 12 has no epsilon = inf
    rows = []
    for variant, phase2 in ((WARM_NO_PHASE2, "none"), (WARM_FULL, "schedule")):
        for label, model in table12_models(plan).items():
            init = plan.phase1_run(model=model)
            seeds = plan.seeds if model == plan.model else plan.ablation_seeds
            rows.append(
                RunRow(f"{variant} / {label}", _by_epsilon(plan.cells(MAIN_TASK, init, phase2, epsilons, seeds)))
            )
    return rows


def curve_epsilons(plan: DPRandPPlan) -> list[float]:
    """Figure 5's two budgets: the smallest and the largest epsilon of the main task (inf, no
    noise, counts as the largest: the paper's sigma = 0 against its sigma = 9.3)."""
    epsilons = sorted(plan.epsilons(MAIN_TASK))
    return list(dict.fromkeys([epsilons[0], epsilons[-1]]))


def figure_runs(plan: DPRandPPlan, figure: str) -> dict[str, dict]:
    """{series: {x key: runs}} of a figure: figure2, figure4, figure5 (training curves at
    two budgets) and figure7 (the share of epsilon in Phase II) by epsilon, figure6 by Phase
    II steps."""
    main = plan.main_init
    if figure == "figure2":
        return {
            WARM_FULL: plan.cells(MAIN_TASK, main, "schedule"),
            WARM_NO_PHASE2: plan.cells(MAIN_TASK, main, "none"),
            PHASE2_ONLY: plan.cells(MAIN_TASK, main, "all"),
            COLD_ROW: plan.cells(MAIN_TASK, None, "none"),
        }
    if figure == "figure4":
        return {"warm": plan.cells(MAIN_TASK, main, "none"), "cold": plan.cells(MAIN_TASK, None, "none")}
    if figure == "figure5":
        epsilons = curve_epsilons(plan)
        return {
            "warm": plan.cells(MAIN_TASK, main, "none", epsilons),
            "cold": plan.cells(MAIN_TASK, None, "none", epsilons),
        }
    if figure == "figure6":
        return {"warm": sweep_over_all_seeds(plan, "figure6", main)}
    if figure == "figure7":
        return {WARM_FULL: plan.cells(MAIN_TASK, main, "schedule")}
    raise KeyError(figure)


def sweep_over_all_seeds(plan: DPRandPPlan, name: str, init) -> dict[int, list[PrivateRun]]:
    """{Phase II steps: runs} of a sweep: its ablation seeds, and every seed of the main runs at
    the points the plan runs for Figure 2 anyway (no Phase II, the schedule's, all of it, at
    the sweep's epsilon). A point's mean is then over every seed there is, as Figure 2's at the
    same runs, and no run is added."""
    epsilon, _ = plan.sweep(name)
    sweep = plan.sweep_runs(name, init)
    if epsilon not in plan.epsilons(MAIN_TASK):
        return sweep
    entry = plan.entry(MAIN_TASK, epsilon)
    shared = {0, entry.phase2_steps, entry.steps}
    return {
        steps: list(dict.fromkeys([*runs, *(plan.run(MAIN_TASK, init, epsilon, s, steps) for s in plan.seeds)]))
        if steps in shared
        else runs
        for steps, runs in sweep.items()
    }


TABLE10_SERIES = "Table 10 / "  # claim runs of Table 10's synthetic sets: "Table 10 / <column>"
TABLE11_SERIES = "Table 11 / "  # and of Table 11's Phase I methods: "Table 11 / <row>"
TABLE12_SERIES = "Table 12 / "  # Table 12's models: "Table 12 / <row>"
TABLE25_SERIES = "Table 25 / phase2_steps="  # Table 25's cold sweep: "Table 25 / phase2_steps=<p>"
# Tables 2, 3 and 16 (other tasks), when the task has runs of its own: "<table> / <row>"
TASK_TABLES = {"table2": "CIFAR-100", "table3": "DermaMNIST", "table16": "DermaMNIST"}


def claim_runs(plan: DPRandPPlan) -> dict[str, dict[float, list[PrivateRun]]]:
    """The runs the `dprandp_claims` table compares: Figure 2's series on the main task at
    its epsilons; Table 10's synthetic sets, Table 11's Phase I methods, Table 12's models and
    Table 25's cold Phase II sweep at theirs; Tables 2, 3 and 16 where their task has runs of
    its own (a task that reuses another's runs adds nothing)."""
    series = figure_runs(plan, "figure2")
    epsilon = float(plan.ablations.get("table10_epsilon", 1))
    for column, runs in table10_cells(plan).items():
        series[TABLE10_SERIES + column] = {epsilon: runs}
    for row in table11_rows(plan):
        if row.label != COLD_ROW:
            series[TABLE11_SERIES + row.label] = {_epsilon_of(key): runs for key, runs in row.cells.items()}
    for row in table12_rows(plan):
        series[TABLE12_SERIES + row.label] = {_epsilon_of(key): runs for key, runs in row.cells.items()}
    epsilon, _ = plan.sweep("table25")
    for steps, runs in plan.sweep_runs("table25", None).items():
        series[f"{TABLE25_SERIES}{steps}"] = {epsilon: runs}
    for table, task in TASK_TABLES.items():
        if task in plan.tasks and plan.source_task(task) == task:
            for row in table_rows(plan, table):
                series[f"{table} / {row.label}"] = {_epsilon_of(key): runs for key, runs in row.cells.items()}
    return series


def _epsilon_of(column: str) -> float:
    return float(column.removeprefix("epsilon="))


TABLES = ("table1", "table2", "table3", "table6", "table10", "table11", "table12", "table16", "table24", "table25")
FIGURES = ("figure2", "figure4", "figure5", "figure6", "figure7")
# The computational cost (Tables 8 and 9): run times, not results, so a rule of their own
# (they also read Phase I metrics and the linear probe's study).
COST_TABLES = ("table8", "table9")


def cost_runs(plan: DPRandPPlan, table: str) -> dict[str, dict[float, list[PrivateRun]]]:
    """The private runs a cost table times, by series: Table 9's whole DP-RandP runs, and the
    runs that spend every step in one phase (w/o Phase II: all Phase III; Phase II only),
    whose seconds per step time each phase. Table 8 (Phase I, feature extraction) has none."""
    if table == "table8":
        return {}
    if table == "table9":
        series = figure_runs(plan, "figure2")
        return {name: series[name] for name in (WARM_FULL, WARM_NO_PHASE2, PHASE2_ONLY)}
    raise KeyError(table)


def runs_of(rows_or_series) -> list[PrivateRun]:
    found = []
    for item in rows_or_series:
        cells = item.cells if isinstance(item, RunRow) else item
        for runs in cells.values():
            found += runs
    return found


def needs(plan: DPRandPPlan, name: str) -> list[PrivateRun]:
    """The runs behind one table, figure or the claims, in a stable order."""
    if name in TABLES:
        runs = runs_of(table_rows(plan, name))
    elif name in COST_TABLES:
        runs = runs_of(cost_runs(plan, name).values())
    elif name in FIGURES:
        runs = runs_of(figure_runs(plan, name).values())
    elif name == "claims":
        runs = runs_of(claim_runs(plan).values())
    else:
        raise KeyError(name)
    return list(dict.fromkeys(runs))


def all_runs(plan: DPRandPPlan) -> list[PrivateRun]:
    runs = []
    for name in (*TABLES, *COST_TABLES, *FIGURES, "claims"):
        runs += needs(plan, name)
    return sorted(dict.fromkeys(runs))
