"""The compute budget of a target, end to end: plan the jobs with Snakemake, count each
one, read the smoke run's memory, and write the tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dpvip.budget.datasets import DatasetSizes
from dpvip.budget.estimates import estimate
from dpvip.budget.job_budget import Facts, JobBudget
from dpvip.budget.smoke import memory_column, smoke_memory
from dpvip.budget.tables import (
    job_frame,
    load_statements,
    notes,
    runtime_problems,
    statement_notes,
    statements_frame,
    summary_frame,
)
from dpvip.budget.workflow import PlannedWorkflow, plan_workflow

DATA_FILE = "compute_budget.yaml"  # in the config's paper_values folder
SMOKE_CONFIG = "config/smoke.yaml"
TABLES = {
    "compute_budget": "Compute budget per job",
    "compute_budget_summary": "Compute budget per job type",
    "compute_budget_papers": "Compute budget beside the papers' run times",
}


@dataclass
class Budget:
    workflow: PlannedWorkflow
    budgets: list[JobBudget]
    memory: list = field(default_factory=list)  # per job: peak RSS (MB) or "no smoke run"
    statements: list[dict] = field(default_factory=list)

    @property
    def retries(self) -> int | None:
        return self.workflow.profile.get("retries")

    def frames(self) -> dict:
        return {
            "compute_budget": job_frame(self.budgets, self.memory, self.retries),
            "compute_budget_summary": summary_frame(self.budgets),
            "compute_budget_papers": statements_frame(self.budgets, self.statements),
        }

    def problems(self):
        return runtime_problems(self.budgets)


def _smoke_records(
    snakefile: Path,
    configfiles: Sequence[str | Path],
    profile,
    smoke_config: str | Path | None,
    smoke_dir,
    workdir: str | Path | None,
) -> dict:
    """The smoke run's peak RSS per memory key ({} when there is no smoke config or run)."""
    if smoke_config is None or not Path(smoke_config).is_file():
        return {}
    if not (Path(smoke_dir) / "results" / "benchmarks").is_dir():
        return {}
    smoke = plan_workflow(snakefile, [*configfiles, smoke_config], (), profile, workdir)
    return smoke_memory(smoke, smoke_dir)


def compute_budget(
    snakefile: str | Path,
    configfiles: Sequence[str | Path] = (),
    targets: Sequence[str] = (),
    profile: str | Path | None = None,
    data_file: str | Path | None = None,
    smoke_config: str | Path | None = None,
    smoke_dir: str | Path = ".",
    workdir: str | Path | None = None,
) -> Budget:
    """Every job `targets` needs under the config (over the embedded one), counted.
    `data_file`: the papers' statements and dataset sizes (default: the config's
    paper_values/compute_budget.yaml); `smoke_config`: layered over `configfiles` for the
    smoke run whose benchmarks under `smoke_dir` give host memory; `workdir`: where Snakemake
    plans (default: here)."""
    snakefile = Path(snakefile).resolve()
    workflow = plan_workflow(snakefile, configfiles, targets, profile, workdir)
    if data_file is None:
        data_file = snakefile.parent / workflow.config["paper_values"] / DATA_FILE
    data = load_statements(data_file)
    facts = Facts(workflow.names, DatasetSizes(data.get("datasets", {})))
    budgets = [estimate(job, facts) for job in workflow.jobs]
    records = _smoke_records(snakefile, configfiles, profile, smoke_config, smoke_dir, workdir)
    memory = memory_column(workflow.jobs, workflow.names, records)
    return Budget(workflow, budgets, memory, data.get("statements", []))


def write_budget_tables(budget: Budget, folder: str | Path) -> list[Path]:
    """compute_budget{,_summary,_papers}.{csv,md,tex} in `folder`."""
    from dpvip.report.common.tables import write_table

    scale = budget.workflow.config.get("scale")
    written = []
    for name, frame in budget.frames().items():
        path = Path(folder) / f"{name}.csv"
        table_notes = statement_notes() if name == "compute_budget_papers" else notes(scale)
        write_table(frame, path, f"{TABLES[name]} ({scale or 'configured'} scale)", table_notes)
        written.append(path)
    return written
