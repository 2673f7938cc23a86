"""The budget of real workflow DAGs (planned by Snakemake): every GPU rule has counted rows,
the tables and the command line write them, and at paper scale every GPU job's Slurm runtime
covers its budget or the job resumes."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from dpvip.budget.compute import compute_budget, write_budget_tables
from dpvip.budget.job_budget import CPU
from dpvip.budget.tables import RESUMES, runtime_check
from dpvip.logs import LIBRARY_VARIABLE
from dpvip.privacy.randomness import KEEP_KEYS_ENV, KEY_DIR_ENV

ROOT = Path(__file__).resolve().parents[2]
SET_BY_THE_SNAKEFILE = (KEY_DIR_ENV, KEEP_KEYS_ENV, LIBRARY_VARIABLE, "PYTHONPATH")
pytestmark = pytest.mark.workflow


@pytest.fixture(scope="module")
def embedded():
    before = {name: os.environ.get(name) for name in SET_BY_THE_SNAKEFILE}
    budget = compute_budget(ROOT / "Snakefile", [], profile=ROOT / "profiles" / "slurm")
    # planning parses the Snakefile, which sets its jobs' environment (the key store, the
    # library's path): not ours. (Libraries imported meanwhile may add their own variables:
    # scikit-learn sets KMP_DUPLICATE_LIB_OK.)
    assert {name: os.environ.get(name) for name in SET_BY_THE_SNAKEFILE} == before
    return budget


def gpu_rules(budget) -> set[str]:
    """The rules that ask for GPUs, from the loaded workflow itself."""
    return {rule.name for rule in budget.workflow.names["workflow"].rules if "gpu" in rule.resources}


def test_every_gpu_rule_of_the_embedded_config_has_counted_rows(embedded):
    rules = gpu_rules(embedded)
    assert rules == {"syn_vip", "dp_mae", "evaluate", "dprandp_phase1", "dprandp_private"} | {
        "transfer_features",
        "transfer_study",
    }
    gpu = [b for b in embedded.budgets if b.job.declares_gpu]
    assert {b.job.rule for b in gpu} == rules
    assert [b.job.name for b in gpu if b.unmodelled or b.flops <= 0] == []
    assert {b.job_type for b in gpu} >= {"syn_vip", "dp_mae", "linear_probe", "few_shot", "coco", "ade20k"}
    assert all(b.job_type == CPU and b.flops == 0 for b in embedded.budgets if not b.job.declares_gpu)


def test_the_tables_have_a_row_per_gpu_job_and_a_total(embedded, tmp_path):
    written = write_budget_tables(embedded, tmp_path)
    names = ["compute_budget.csv", "compute_budget_summary.csv", "compute_budget_papers.csv"]
    assert [p.name for p in written] == names
    jobs = pd.read_csv(tmp_path / "compute_budget.csv")
    gpu_jobs = [b for b in embedded.budgets if b.job_type != CPU]
    assert set(jobs["job"]) >= {b.job.name for b in gpu_jobs}
    summary = pd.read_csv(tmp_path / "compute_budget_summary.csv").set_index("job type")
    assert summary.loc["total", "PFLOP"] == pytest.approx(sum(b.flops for b in embedded.budgets) / 1e15)
    assert summary.loc["total", "jobs"] == len(embedded.budgets)
    assert "40%" in (tmp_path / "compute_budget.md").read_text()
    assert "no smoke run" in set(jobs["peak RSS (MB, smoke run)"].astype(str))


def test_the_command_line_prints_the_summary_and_writes_the_tables(tmp_path, capsys):
    from dpvip.cli._common import OneLineParser
    from dpvip.cli.budget import add_commands

    parser = OneLineParser(prog="dpvip")
    add_commands(parser.add_subparsers(dest="command", parser_class=OneLineParser))
    options = ["--snakefile", str(ROOT / "Snakefile"), "--smoke-config", "none", "--out", str(tmp_path)]
    args = parser.parse_args(["budget", *options, "figure_syn_vip_loss"])
    assert args.handler(args) == 0
    printed = capsys.readouterr().out
    assert "(Syn)-ViP MAE pre-training" in printed and "| total" in printed
    jobs = pd.read_csv(tmp_path / "compute_budget.csv")
    assert set(jobs[jobs["job type"] != "CPU jobs"]["job"]) == {"syn_vip[model=micro]", "syn_vip[model=pico]"}


def test_a_target_snakemake_refuses_is_one_line_of_bad_input():
    from dpvip.budget.workflow import plan_workflow
    from dpvip.errors import DpvipInputError

    with pytest.raises(DpvipInputError, match="^snakemake: Target rules may not contain wildcards"):
        plan_workflow(ROOT / "Snakefile", targets=["syn_vip"])


@pytest.mark.slow
def test_paper_scale_runtimes_cover_each_gpu_job_or_it_resumes():
    budget = compute_budget(ROOT / "Snakefile", [ROOT / "config" / "paper.yaml"], profile=ROOT / "profiles" / "slurm")
    gpu = [b for b in budget.budgets if b.job.declares_gpu]
    assert {b.job.rule for b in gpu} == gpu_rules(budget)
    assert [b.job.name for b in gpu if b.unmodelled] == []
    checks = {b.job.name: runtime_check(b) for b in gpu}
    assert all(check.runtime_hours is not None for check in checks.values())  # every GPU job has a runtime
    assert [name for name, check in checks.items() if check.problem] == []
    long = [b for b in gpu if runtime_check(b).limits and runtime_check(b).limits > 1]
    assert all(b.job_type in RESUMES for b in long)
