"""`dpvip bench workflow` on a constructed run: job times per stage, slowest jobs, start-up."""

from __future__ import annotations

import os
import time

import pytest
from conftest import dpvip_json, run_dpvip

from dpvip.errors import DpvipInputError
from dpvip.report.jobs.workflow_bench import bench_workflow, format_summary

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def fake_job(results, job: str, seconds: float, end: float, startup: float | None) -> None:
    benchmark = results / "benchmarks" / f"{job}.tsv"
    benchmark.parent.mkdir(parents=True, exist_ok=True)
    benchmark.write_text(HEADER + f"{seconds}\t0:00:01\t100\t200\t90\t95\t0\t0\t50\t1\n")
    os.utime(benchmark, (end, end))
    log = results / "logs" / f"{job}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    first = "" if startup is None else f"start-up: {startup:.2f} s from process start to the job's first line\n"
    log.write_text(first + "work\n")


@pytest.fixture
def run(tmp_path):
    results, now = tmp_path / "results", time.time()
    fake_job(results, "synthetic/shaders/shard-000000", 10.0, now - 90, 2.0)
    fake_job(results, "synthetic/shaders/shard-000001", 12.0, now - 88, 2.0)
    fake_job(results, "evaluate/linear_probe/syn_vip_micro/ImageNet-1K", 40.0, now - 40, 8.0)
    fake_job(results, "tables/vip_table1", 1.0, now, 0.5)
    fake_job(results, "bundle/bundle", 2.0, now - 1, None)
    return tmp_path


def test_stages_slowest_and_startup_share(run):
    summary = bench_workflow(run)
    assert summary["jobs"] == 5 and summary["job_seconds"] == 65.0
    # from the first job's start (now - 100) to the last end (now)
    assert summary["wall_seconds"] == pytest.approx(100.0, abs=0.1)
    assert summary["stages"]["synthetic"] == {
        "jobs": 2,
        "job_seconds": 22.0,
        "startup_seconds": 4.0,
        "startup_share": round(4 / 22, 3),
        "jobs_with_startup": 2,
    }
    # the bundle's log has no start-up line: the share is over the 4 jobs that say it
    assert summary["startup_seconds"] == 12.5 and summary["startup_share"] == round(12.5 / 63, 3)
    assert summary["jobs_with_startup"] == 4
    assert [job["job"] for job in summary["slowest"]][:2] == [
        "evaluate/linear_probe/syn_vip_micro/ImageNet-1K",
        "synthetic/shaders/shard-000001",
    ]
    assert (run / "results/benchmarks/workflow.json").is_file()
    text = format_summary(summary)
    assert text.splitlines()[0] == "wall time 100 s; 5 jobs, 65 s of job time, 20% of it start-up"
    assert "evaluate" in text.splitlines()[3]  # stages by job time, largest first


def test_only_jobs_of_the_last_snakemake_run_count(run):
    log = run / ".snakemake/log/2026-11-23T100000.snakemake.log"
    log.parent.mkdir(parents=True)
    stamp = lambda t: time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(t))  # noqa: E731
    now = time.time()
    log.write_text(f"[{stamp(now - 45)}]\nrule evaluate:\n[{stamp(now + 1)}]\nFinished job 0.\n")
    summary = bench_workflow(run)
    assert summary["jobs"] == 3 and summary["stages"].keys() == {"evaluate", "tables", "bundle"}


def test_command_line_writes_the_summary_and_refuses_a_folder_without_a_run(run, tmp_path_factory):
    summary = dpvip_json("bench", "workflow", "--directory", str(run))
    assert summary["jobs"] == 5
    empty = tmp_path_factory.mktemp("empty")
    done = run_dpvip("bench", "workflow", "--directory", str(empty))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "run the workflow there first" in done.stderr
    with pytest.raises(DpvipInputError, match="results/benchmarks is empty"):
        (empty / "results/benchmarks").mkdir(parents=True)
        bench_workflow(empty)
