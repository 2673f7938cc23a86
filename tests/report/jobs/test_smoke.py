"""The smoke run's table (dpvip.report.jobs.smoke) on a constructed Snakemake log and benchmarks."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from dpvip.errors import DpvipInputError
from dpvip.report.jobs.smoke import (
    benchmark_peak_mb,
    finished_jobs,
    format_jobs,
    format_summary,
    last_run_log,
    main,
    planned_jobs,
    rule_summary,
    smoke_jobs,
)

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"

# What Snakemake 9 writes to .snakemake/log/<stamp>.snakemake.log: a block per started job
# (rule or localrule, indented fields), then a line when it finishes.
LOG = """Building DAG of jobs...
Job stats:
job          count
---------  -------
syn_vip          2
all              1
total            3

[Wed Nov 25 15:21:10 2026]
rule syn_vip:
    input: results/synthetic/shaders/index.json
    output: results/pretrain/syn_vip_nano/model.pt, results/pretrain/syn_vip_nano/metrics.jsonl
    log: results/logs/pretrain/syn_vip_nano.log
    jobid: 12
    benchmark: results/benchmarks/pretrain/syn_vip_nano.tsv
    reason: Missing output files: results/pretrain/syn_vip_nano/model.pt
    wildcards: model=nano
    threads: 2
    resources: tmpdir=/tmp, gpu=0
[Wed Nov 25 15:21:10 2026]
rule syn_vip:
    output: results/pretrain/syn_vip_large/model.pt
    log: results/logs/pretrain/syn_vip_large.log
    jobid: 7
    benchmark: results/benchmarks/pretrain/syn_vip_large.tsv
    wildcards: model=large
Select jobs to execute...
[Wed Nov 25 15:21:40 2026]
Finished jobid: 12 (Rule: syn_vip)
1 of 3 steps (33%) done
[Wed Nov 25 15:22:40 2026]
Finished jobid: 7 (Rule: syn_vip)
2 of 3 steps (67%) done
[Wed Nov 25 15:22:41 2026]
localrule all:
    input: results/pretrain/syn_vip_nano/model.pt, results/pretrain/syn_vip_large/model.pt
    jobid: 0
    reason: Input files updated by another job
    resources: tmpdir=/tmp
[Wed Nov 25 15:22:41 2026]
Finished jobid: 0 (Rule: all)
3 of 3 steps (100%) done
"""


def write_run(workdir, log: str = LOG, records: dict | None = None) -> None:
    records = records or {
        "pretrain/syn_vip_nano": ("12.5", "812.25", "20.0"),
        "pretrain/syn_vip_large": ("60", "NA", "NA"),
    }
    for job, (seconds, rss, cpu) in records.items():
        path = workdir / "results/benchmarks" / f"{job}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HEADER + f"{seconds}\t0:00:30\t{rss}\t900\t700\t750\t0\t0\t95\t{cpu}\n")
    logs = workdir / ".snakemake/log"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "2026-11-25T152109.snakemake.log").write_text(log)


def test_planned_and_finished_jobs_from_the_log():
    planned = planned_jobs(LOG)
    assert sorted(planned) == [0, 7, 12]
    assert (planned[12].rule, planned[12].benchmark) == ("syn_vip", "results/benchmarks/pretrain/syn_vip_nano.tsv")
    assert (planned[0].rule, planned[0].benchmark) == ("all", None)  # a localrule, without a benchmark
    assert finished_jobs(LOG) == {12: "syn_vip", 7: "syn_vip", 0: "all"}


def test_smoke_jobs_read_each_finished_jobs_benchmark(tmp_path):
    write_run(tmp_path)
    jobs = smoke_jobs(tmp_path)
    assert [(j.rule, j.job, j.max_rss_mb, j.seconds, j.cpu_seconds) for j in jobs] == [
        ("syn_vip", "pretrain/syn_vip_nano", 812.25, 12.5, 20.0),
        ("syn_vip", "pretrain/syn_vip_large", None, 60.0, None),  # NA: no sample taken
    ]
    # sampled every 0.5 s throughout, or for its first 15 s only (then every 30 s)
    assert [job.rss_is_lower_bound for job in jobs] == [False, True]
    summary = rule_summary(jobs)
    assert summary == [
        {
            "rule": "syn_vip",
            "jobs": 2,
            "peak_rss_mb": 812.25,
            "peak_job": "pretrain/syn_vip_nano",
            "peak_is_lower_bound": False,
            "seconds": 72.5,
            "slowest_seconds": 60.0,
        }
    ]
    assert "| syn_vip | pretrain/syn_vip_large | NA | 60.0 | NA |" in format_jobs(jobs)
    assert "| syn_vip | 2 | 812 | pretrain/syn_vip_nano | 72.5 | 60.0 |" in format_summary(jobs)
    jobs[0] = replace(jobs[0], seconds=40.0)
    assert "| syn_vip | pretrain/syn_vip_nano | >=812 | 40.0 | 20.0 |" in format_jobs(jobs)


def test_a_peak_the_job_log_reports_replaces_the_sampled_one(tmp_path):
    write_run(
        tmp_path,
        records={"pretrain/syn_vip_nano": ("12", "800", "20"), "pretrain/syn_vip_large": ("60", "4327.77", "90")},
    )
    log = tmp_path / "results/logs/pretrain/syn_vip_large.log"
    log.parent.mkdir(parents=True)
    log.write_text("start-up: 4.45 s\nsteps\npeak RSS: 5574.7 MB, the job's largest process (getrusage)\n")
    large = smoke_jobs(tmp_path)[1]
    assert (large.max_rss_mb, large.exact_rss_mb, large.peak_rss_mb, large.rss_is_lower_bound) == (
        4327.77,
        5574.7,
        5574.7,
        False,
    )
    assert "| syn_vip | pretrain/syn_vip_large | 5575 | 60.0 | 90.0 |" in format_jobs(smoke_jobs(tmp_path))
    assert rule_summary(smoke_jobs(tmp_path))[0]["peak_job"] == "pretrain/syn_vip_large"


def test_one_jobs_peak_prefers_the_exact_one_of_its_log(tmp_path):
    write_run(
        tmp_path,
        records={"pretrain/syn_vip_nano": ("12", "800", "20"), "pretrain/syn_vip_large": ("60", "4327.77", "90")},
    )
    large, nano = (tmp_path / f"results/benchmarks/pretrain/syn_vip_{size}.tsv" for size in ("large", "nano"))
    log = tmp_path / "results/logs/pretrain/syn_vip_large.log"
    log.parent.mkdir(parents=True)
    log.write_text("peak RSS: 5574.7 MB, the job's largest process (getrusage)\n")
    assert (benchmark_peak_mb(large, log), benchmark_peak_mb(nano)) == (5574.7, 800.0)  # nano: sampled, no log
    empty = tmp_path / "results/benchmarks/pretrain/syn_vip_tiny.tsv"
    empty.write_text(HEADER)
    assert benchmark_peak_mb(empty) is None and benchmark_peak_mb(tmp_path / "none.tsv") is None


def test_a_job_that_finished_without_its_benchmark_is_refused(tmp_path):
    write_run(tmp_path, records={"pretrain/syn_vip_nano": ("30", "800", "50")})
    with pytest.raises(DpvipInputError, match=r"job 7 \(syn_vip\) finished without its benchmark file"):
        smoke_jobs(tmp_path)


def test_unfinished_jobs_are_left_out(tmp_path):
    write_run(tmp_path, log=LOG.replace("Finished jobid: 7 (Rule: syn_vip)\n", ""))
    assert [job.job for job in smoke_jobs(tmp_path)] == ["pretrain/syn_vip_nano"]


def test_the_last_run_log_skips_a_later_dry_run(tmp_path):
    write_run(tmp_path)
    logs = tmp_path / ".snakemake/log"
    dry = logs / "2026-11-25T160000.snakemake.log"
    dry.write_text(LOG.split("Select jobs")[0] + "This was a dry-run (flag -n).\n")  # jobs listed, none run
    os.utime(dry, (os.path.getmtime(logs / "2026-11-25T152109.snakemake.log") + 60,) * 2)
    assert last_run_log(tmp_path).name == "2026-11-25T152109.snakemake.log"
    dry.unlink()
    (logs / "2026-11-25T152109.snakemake.log").unlink()
    with pytest.raises(DpvipInputError, match="no Snakemake run log with jobs"):
        last_run_log(tmp_path)


def test_main_prints_and_writes_both_tables(tmp_path, capsys):
    write_run(tmp_path)
    out = tmp_path / "smoke.md"
    assert main([str(tmp_path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed == out.read_text()
    assert printed.index("| rule | jobs |") < printed.index("| rule | job |")
    assert main([str(tmp_path / "nowhere")]) == 2
