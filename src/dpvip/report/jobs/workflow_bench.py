"""`dpvip bench workflow`: where the time of the last workflow run went, from its files.

Every job writes a Snakemake `benchmark:` record under `results/benchmarks/<stage>/...` and a
log under `results/logs/<stage>/...` at the same relative path; the log's first line says how
long the job took from process start to its first useful line (`dpvip.logs`). A job's end is
its benchmark file's modification time and its start that minus its wall seconds, so the
summary needs no scheduler: it works alike for local and Slurm runs.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from dpvip.errors import DpvipInputError
from dpvip.files import read_benchmark, write_json
from dpvip.logs import STARTUP_PREFIX

SLOWEST = 10
_STARTUP = re.compile(re.escape(STARTUP_PREFIX) + r" ([0-9.]+) s")
_SNAKEMAKE_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]", re.M)


@dataclass(frozen=True)
class JobTime:
    job: str  # the benchmark's path under results/benchmarks, without .tsv
    stage: str
    seconds: float
    startup: float | None  # None: the job's log has no start-up line
    end: float  # epoch seconds


def job_times(results: Path) -> list[JobTime]:
    """Every job with a benchmark record under `results/benchmarks`."""
    benchmarks, logs = results / "benchmarks", results / "logs"
    jobs = []
    for path in sorted(benchmarks.rglob("*.tsv")):
        record = read_benchmark(path)
        if record is None:
            continue
        relative = path.relative_to(benchmarks).with_suffix("")
        stage = relative.parts[0] if len(relative.parts) > 1 else "other"
        jobs.append(
            JobTime(
                relative.as_posix(),
                stage,
                record["seconds"],
                _startup(logs / relative.with_suffix(".log")),
                path.stat().st_mtime,
            )
        )
    return jobs


def _startup(log: Path) -> float | None:
    if not log.is_file():
        return None
    with log.open(errors="replace") as handle:
        head = handle.read(4096)
    match = _STARTUP.search(head)
    return float(match.group(1)) if match else None


def last_run_window(workdir: Path) -> tuple[float, float] | None:
    """(first, last) timestamp of the newest Snakemake log in `workdir/.snakemake/log`."""
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"), key=lambda p: p.stat().st_mtime)
    for log in reversed(logs):
        stamps = _SNAKEMAKE_STAMP.findall(log.read_text(errors="replace"))
        if stamps:
            times = [dt.datetime.strptime(" ".join(s.split()), "%a %b %d %H:%M:%S %Y").timestamp() for s in stamps]
            return min(times), max(times)
    return None


def summarise(jobs: list[JobTime], window: tuple[float, float] | None = None) -> dict:
    """Wall time, job time per stage, the slowest jobs and the share spent starting up.

    With a `window` (the last Snakemake run), only jobs that ended inside it count, with a
    second of slack for the log's whole-second stamps."""
    if window is not None:
        jobs = [job for job in jobs if window[0] - 1 <= job.end <= window[1] + 1]
    if not jobs:
        raise DpvipInputError("no benchmark records of a run: run the workflow first (results/benchmarks is empty)")
    wall = max(job.end for job in jobs) - min(job.end - job.seconds for job in jobs)
    stages = {}
    for stage in sorted({job.stage for job in jobs}):
        members = [job for job in jobs if job.stage == stage]
        stages[stage] = _totals(members)
    slowest = sorted(jobs, key=lambda job: job.seconds, reverse=True)[:SLOWEST]
    return {
        "wall_seconds": round(wall, 1),
        **_totals(jobs),
        "stages": stages,
        "slowest": [{k: v for k, v in asdict(job).items() if k != "end"} for job in slowest],
    }


def _totals(jobs: list[JobTime]) -> dict:
    seconds = sum(job.seconds for job in jobs)
    timed = [job for job in jobs if job.startup is not None]
    startup = sum(job.startup for job in timed)
    timed_seconds = sum(job.seconds for job in timed)
    return {
        "jobs": len(jobs),
        "job_seconds": round(seconds, 1),
        "startup_seconds": round(startup, 1),
        # share over the jobs whose log has a start-up line (all, in this workflow)
        "startup_share": round(startup / timed_seconds, 3) if timed_seconds else None,
        "jobs_with_startup": len(timed),
    }


def bench_workflow(workdir: str | Path = ".", out: str | Path | None = None) -> dict:
    """Summarise the last run in `workdir` and write it to results/benchmarks/workflow.json."""
    workdir = Path(workdir)
    results = workdir / "results"
    if not (results / "benchmarks").is_dir():
        raise DpvipInputError(f"no benchmarks folder {results / 'benchmarks'}: run the workflow there first")
    summary = summarise(job_times(results), last_run_window(workdir))
    write_json(summary, Path(out) if out else results / "benchmarks" / "workflow.json")
    return summary


def format_summary(summary: dict) -> str:
    """The summary as a plain-text table: stages, then the slowest jobs."""
    lines = [
        f"wall time {summary['wall_seconds']:.0f} s; {summary['jobs']} jobs, "
        f"{summary['job_seconds']:.0f} s of job time, {_share(summary)} of it start-up",
        "",
        f"{'stage':<14}{'jobs':>6}{'job s':>9}{'start-up s':>12}{'share':>8}",
    ]
    for stage, totals in sorted(summary["stages"].items(), key=lambda item: -item[1]["job_seconds"]):
        lines.append(
            f"{stage:<14}{totals['jobs']:>6}{totals['job_seconds']:>9.1f}"
            f"{totals['startup_seconds']:>12.1f}{_share(totals):>8}"
        )
    lines += ["", f"the {len(summary['slowest'])} slowest jobs:"]
    for job in summary["slowest"]:
        startup = "?" if job["startup"] is None else f"{job['startup']:.1f}"
        lines.append(f"  {job['seconds']:7.1f} s  (start-up {startup:>5} s)  {job['job']}")
    return "\n".join(lines)


def _share(totals: dict) -> str:
    return "?" if totals["startup_share"] is None else f"{100 * totals['startup_share']:.0f}%"
