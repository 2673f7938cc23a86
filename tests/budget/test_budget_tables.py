"""The runtime check, the papers' statements beside ours, and the smoke run's memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpvip.budget import PEAK_TFLOPS, UTILISATION
from dpvip.budget.job_budget import JobBudget
from dpvip.budget.smoke import NO_SMOKE_RUN, memory_column, smoke_memory
from dpvip.budget.tables import (
    FITS,
    RESUMES_LABEL,
    TOO_SHORT,
    gpu_hours,
    load_statements,
    runtime_check,
    runtime_problems,
    statements_frame,
)
from dpvip.budget.workflow import PlannedWorkflow, WorkflowJob
from dpvip.errors import DpvipInputError

ROOT = Path(__file__).resolve().parents[2]
A100_HOUR = PEAK_TFLOPS["A100"] * 1e12 * UTILISATION * 3600  # FLOPs an A100 does in an hour


def budget(job_type: str, a100_hours: float, runtime_minutes: int | None, gpus: int = 1, nodes: int = 1):
    resources = {"gpu": gpus, "nodes": nodes} | ({"runtime": runtime_minutes} if runtime_minutes else {})
    job = WorkflowJob("rule", {"name": job_type}, {}, resources, None)
    return JobBudget(job, job_type, "net", flops=round(a100_hours * A100_HOUR))


def test_gpu_hours_at_the_stated_peak_and_utilisation():
    assert gpu_hours(A100_HOUR, "A100") == pytest.approx(1.0)
    assert gpu_hours(A100_HOUR, "H100") == pytest.approx(312 / 989)


def test_a_dp_job_takes_its_time_factor_on_its_training_not_its_evaluation():
    job = budget("dp_finetune", 1.0, 600)
    job.parts["evaluation"] = round(0.25 * A100_HOUR)
    job.time_factor = 2.0
    assert gpu_hours(job.timed_flops, "A100") == pytest.approx(0.75 * 2 + 0.25)
    assert runtime_check(job).wall_hours == pytest.approx(1.75)


def test_runtime_covers_the_wall_time_over_all_gpus_of_all_nodes():
    check = runtime_check(budget("dp_mae", 96.0, 60, gpus=8, nodes=4))  # 3 h on 32 GPUs
    assert check.status == TOO_SHORT or check.status == RESUMES_LABEL
    assert check.wall_hours == pytest.approx(3.0)
    assert runtime_check(budget("dp_mae", 96.0, 180, gpus=8, nodes=4)).status == FITS


def test_a_short_runtime_is_a_problem_only_for_a_job_that_does_not_resume():
    resumes = runtime_check(budget("coco", 10.0, 240))
    assert (resumes.status, resumes.limits) == (RESUMES_LABEL, 3)
    assert resumes.label(retries=2) == "resumes: 3 runtime limits"
    assert resumes.label(retries=1) == "resumes: 3 runtime limits (more than retries 1 + 1)"
    short = budget("a_job_that_does_not_resume", 10.0, 240)
    assert runtime_check(short).status == TOO_SHORT
    assert [b for b, _ in runtime_problems([short, budget("coco", 10.0, 240), budget("coco", 1.0, 240)])] == [short]


def test_every_statement_of_the_data_file_is_complete():
    data = load_statements(ROOT / "config" / "paper_values" / "compute_budget.yaml")
    assert {s["paper"] for s in data["statements"]} == {"vip", "dprandp", "mehta"}
    assert {"ImageNet-1K", "COCO", "ADE20K", "CIFAR-10", "DermaMNIST"} <= set(data["datasets"])


def test_a_statement_without_its_time_is_refused(tmp_path):
    bad = tmp_path / "budget.yaml"
    entry = "{id: x, paper: vip, source: s, job_type: dp_mae, job: j, per: step, hardware: A100}"
    bad.write_text(f"statements:\n  - {entry}\n")
    with pytest.raises(DpvipInputError, match="statement x needs one of seconds"):
        load_statements(bad)


def test_the_utilisation_a_papers_time_implies_for_our_flops():
    ours = WorkflowJob("dp_mae", {"run": "vip_base"}, {}, {"gpu": 8}, None)
    step = 4.0e15
    row = statements_frame(
        [JobBudget(ours, "dp_mae", "base", steps=10, flops=10 * step, units={"step": step})],
        [{"id": "v", "paper": "vip", "source": "A.2", "quote": "q", "job_type": "dp_mae", "job": "run=vip_base]",
          "per": "step", "hardware": "A100", "devices": 48, "seconds": 25}],
    ).iloc[0]  # fmt: skip
    assert row["our job"] == "dp_mae[run=vip_base]"
    assert row["paper device-hours"] == pytest.approx(48 * 25 / 3600, rel=1e-3)
    assert row["our A100 GPU-hours"] == pytest.approx(step / A100_HOUR, rel=1e-3)
    assert row["utilisation the paper's time implies"] == pytest.approx(step / (48 * 25 * 312e12), rel=1e-3)


def test_peak_rss_comes_from_the_smoke_job_of_the_same_rule_and_network(tmp_path):
    def dp_job(run: str, model: str) -> WorkflowJob:
        return WorkflowJob("dp_mae", {"run": run}, {"model": model}, {"gpu": 1}, f"results/benchmarks/{run}.tsv")

    bench = tmp_path / "results" / "benchmarks"
    bench.mkdir(parents=True)
    header = "s\th:m:s\tmax_rss\tmax_vms\n"
    (bench / "vip_base.tsv").write_text(header + "1.0\t0:00:01\t812.5\t900\n1.0\t0:00:01\t900.25\t950\n")
    (bench / "vip_base_dec1.tsv").write_text(header + "1.0\t0:00:01\t640\t700\n")
    smoke = PlannedWorkflow([dp_job("vip_base", "base"), dp_job("vip_base_dec1", "base")], {})
    records = smoke_memory(smoke, tmp_path)
    assert records == {("dp_mae", "base"): 900.25}
    paper = [dp_job("vip_base_bs8192", "base"), dp_job("vip_large", "large")]
    assert memory_column(paper, {}, records) == [900.25, NO_SMOKE_RUN]
