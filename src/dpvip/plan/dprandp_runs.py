"""The DP-RandP runs the tables and figures need (torch-free: the workflow knows every job,
and checks the `dprandp` config, before anything runs).

A `Phase1Run` is a contrastive pre-training on synthetic images (Phase I); a `PrivateRun`
is Phases II and III on one private task from one initialisation (a Phase I run, or
`cold`: random), with `phase2_steps` of its `steps` spent on the classifier head:

- DP-RandP: the task schedule's Phase II steps (96 of 875 at epsilon 1 on CIFAR-10);
- DP-RandP w/o Phase II: 0 (Table 6), warm;
- Phase III only (De et al.'s DP-SGD): 0, cold;
- Phase II only (private linear probing, Fig. 6's right end): all the steps.

One schedule entry per epsilon gives the total steps, the Phase II steps and both learning
rates (DP-RandP Tables 13-15); epsilon `inf` is clipping without noise. A task may take
its runs from another (`runs_of`), when a configuration stands in for both with the same
data and settings (the embedded default uses digits for all three).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpvip.errors import DpvipInputError
from dpvip.privacy import run_options
from dpvip.plan.dprandp_phase1 import METHODS

COLD = "cold"
TASKS = ("CIFAR-10", "CIFAR-100", "DermaMNIST")
MAIN_TASK = "CIFAR-10"  # where the paper runs its ablations


def epsilon_label(epsilon: float) -> str:
    """1 -> '1', 7.42 -> '7.42', inf -> 'inf' (file names and table columns)."""
    return "inf" if math.isinf(epsilon) else f"{float(epsilon):g}"


def parse_epsilon(value) -> float:
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity", ".inf"):
        return math.inf
    epsilon = float(value)
    if not epsilon > 0:
        raise DpvipInputError(f"epsilon {value} must be positive (or inf)")
    return epsilon


@dataclass(frozen=True, order=True)
class Phase1Run:
    model: str
    dataset: str
    method: str = "align_uniform"
    name: str = ""

    @property
    def path(self) -> str:
        """Its checkpoint, relative to results/dprandp."""
        return f"phase1/{self.name}/model.pt"


@dataclass(frozen=True, order=True)
class PrivateRun:
    task: str
    init: str  # a Phase1Run name, or COLD
    model: str
    phase2_steps: int
    epsilon: float
    seed: int

    @property
    def path(self) -> str:
        """Its result, relative to results/dprandp (without .json)."""
        return f"private/{self.task}/{self.init}/p{self.phase2_steps}_eps{epsilon_label(self.epsilon)}_seed{self.seed}"

    @property
    def warm(self) -> bool:
        return self.init != COLD


@dataclass(frozen=True)
class ScheduleEntry:
    epsilon: float
    steps: int
    phase2_steps: int
    lr_phase2: float
    lr_phase3: float


class DPRandPPlan:
    """Every run of the `dprandp` config section, and which run fills which table cell."""

    def __init__(self, section: dict, synthetic_datasets: dict, privacy: dict | None = None):
        self.section = section
        self.run_options = run_options(privacy)  # randomness, allow_large_delta: every private run's
        phase1 = section["phase1"]
        self.model = phase1["model"]
        self.dataset = phase1["dataset"]
        self.method = phase1.get("method", "align_uniform")
        ablations = section.get("ablations", {})
        self.ablations = ablations
        self.families = {name: spec.get("family", "") for name, spec in synthetic_datasets.items()}
        for dataset in [self.dataset, *ablations.get("datasets", [])]:
            if dataset not in synthetic_datasets:
                raise DpvipInputError(
                    f"dprandp uses synthetic dataset '{dataset}', which synthetic.datasets does not define "
                    f"(known: {', '.join(synthetic_datasets)})"
                )
        for method in [self.method, *ablations.get("methods", [])]:
            if method not in METHODS:
                raise DpvipInputError(f"dprandp Phase I method '{method}' is not one of {', '.join(METHODS)}")
        private = section["private"]
        self.seeds = [int(s) for s in private["seeds"]]
        self.ablation_seeds = [int(s) for s in ablations.get("seeds", self.seeds)]
        # the ablations a claim compares (Tables 10 and 11) may run more seeds than the rest
        self.claim_seeds = [int(s) for s in ablations.get("claim_seeds", self.ablation_seeds)]
        self.tasks = private["tasks"]
        for task, spec in self.tasks.items():
            if task not in TASKS:
                raise DpvipInputError(f"dprandp.private.tasks.{task}: not one of the paper's tasks {', '.join(TASKS)}")
            source = spec.get("runs_of")
            if source is not None and (source not in self.tasks or "runs_of" in self.tasks[source]):
                raise DpvipInputError(
                    f"dprandp.private.tasks.{task}.runs_of '{source}' must name a task with its own schedule"
                )
            if source is None:
                self.schedule(task)  # checks it

    # --- names -----------------------------------------------------------------------------
    def phase1_run(self, model: str | None = None, dataset: str | None = None, method: str | None = None) -> Phase1Run:
        model, dataset, method = model or self.model, dataset or self.dataset, method or self.method
        name = f"randp_{model}"
        if dataset != self.dataset:
            name += f"_{dataset}"
        if method != self.method:
            name += f"_{method}"
        return Phase1Run(model, dataset, method, name)

    @property
    def main_init(self) -> Phase1Run:
        return self.phase1_run()

    def source_task(self, task: str) -> str:
        """The task whose runs `task` shows."""
        return self.tasks[task].get("runs_of") or task

    def schedule(self, task: str) -> dict[float, ScheduleEntry]:
        spec = self.tasks[self.source_task(task)]
        entries = {}
        for position, raw in enumerate(spec.get("schedule", [])):
            entry = ScheduleEntry(
                parse_epsilon(raw["epsilon"]),
                int(raw["steps"]),
                int(raw["phase2_steps"]),
                float(raw["lr_phase2"]),
                float(raw["lr_phase3"]),
            )
            where = f"dprandp.private.tasks.{task}.schedule[{position}]"
            if entry.steps < 1 or not 0 <= entry.phase2_steps <= entry.steps:
                raise DpvipInputError(
                    f"{where}: needs steps >= 1 and 0 <= phase2_steps <= steps, "
                    f"not {entry.steps} and {entry.phase2_steps}"
                )
            if entry.epsilon in entries:
                raise DpvipInputError(f"{where}: epsilon {epsilon_label(entry.epsilon)} appears twice")
            entries[entry.epsilon] = entry
        if not entries:
            raise DpvipInputError(f"dprandp.private.tasks.{task}.schedule is empty")
        return entries

    def entry(self, task: str, epsilon: float) -> ScheduleEntry:
        schedule = self.schedule(task)
        if epsilon not in schedule:
            raise DpvipInputError(
                f"dprandp: task {task} has no schedule entry for epsilon {epsilon_label(epsilon)} "
                f"(known: {', '.join(map(epsilon_label, schedule))})"
            )
        return schedule[epsilon]

    def epsilons(self, task: str) -> list[float]:
        return list(self.schedule(task))

    def ablation_epsilons(self) -> list[float]:
        chosen = [parse_epsilon(e) for e in self.ablations.get("epsilons", [])] or self.epsilons(MAIN_TASK)
        return [e for e in chosen if e in self.schedule(MAIN_TASK)]

    # --- runs ------------------------------------------------------------------------------
    def run(
        self, task: str, init: Phase1Run | None, epsilon: float, seed: int, phase2: str | int = "schedule"
    ) -> PrivateRun:
        """`phase2`: 'schedule' (DP-RandP), 'none' (w/o Phase II, or Phase III only when
        cold), 'all' (Phase II only) or a number of steps."""
        entry = self.entry(task, epsilon)
        steps = {"schedule": entry.phase2_steps, "none": 0, "all": entry.steps}.get(phase2, phase2)
        if not isinstance(steps, int) or not 0 <= steps <= entry.steps:
            raise DpvipInputError(
                f"dprandp: Phase II steps {phase2!r} must be within 0..{entry.steps} "
                f"at epsilon {epsilon_label(epsilon)}"
            )
        model = init.model if init else self.model
        return PrivateRun(self.source_task(task), init.name if init else COLD, model, steps, epsilon, seed)

    def cells(
        self, task: str, init: Phase1Run | None, phase2, epsilons=None, seeds=None
    ) -> dict[float, list[PrivateRun]]:
        """{epsilon: [one run per seed]} of one table row."""
        epsilons = self.epsilons(task) if epsilons is None else epsilons
        seeds = self.seeds if seeds is None else seeds
        return {e: [self.run(task, init, e, s, phase2) for s in seeds] for e in epsilons}

    def sweep(self, name: str) -> tuple[float, list[int]]:
        """(epsilon, Phase II steps) of `ablations.<name>` (figure6: warm; table25: cold)."""
        spec = self.ablations.get(name)
        if not spec:
            return math.inf, []
        epsilon = parse_epsilon(spec["epsilon"])
        return epsilon, [int(s) for s in spec["phase2_steps"]]

    def sweep_runs(self, name: str, init: Phase1Run | None) -> dict[int, list[PrivateRun]]:
        epsilon, points = self.sweep(name)
        return {p: [self.run(MAIN_TASK, init, epsilon, s, p) for s in self.ablation_seeds] for p in points}

    def phase1_runs(self) -> list[Phase1Run]:
        runs = [self.main_init]
        runs += [self.phase1_run(dataset=d) for d in self.ablations.get("datasets", [])]
        runs += [self.phase1_run(method=m) for m in self.ablations.get("methods", [])]
        runs += [self.phase1_run(model=m) for m in self.ablations.get("models", [])]
        return list(dict.fromkeys(runs))

    def phase1_of(self, name: str) -> Phase1Run:
        for run in self.phase1_runs():
            if run.name == name:
                return run
        raise DpvipInputError(f"no Phase I run is called '{name}'")
