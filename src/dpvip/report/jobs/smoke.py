"""The paper-shape smoke run's table: every job's rule, peak RSS and wall seconds.

`config/smoke.yaml` over `config/paper.yaml` runs every job type of the paper DAG once, at
the paper's shapes, for a step or two. Each rule has a Snakemake `benchmark:` file under
`results/benchmarks/` (wall seconds `s`, peak resident memory `max_rss` in MB, `cpu_time`);
which rule wrote which file is read from the run's own Snakemake log
(`.snakemake/log/*.snakemake.log`), where each job's block names its rule, job id and
benchmark file and a `Finished jobid: N (Rule: R)` line says it ended.

`max_rss` is sampled by Snakemake (every 0.5 s for a job's first 15 s, then every 30 s): for
a longer job it is a lower bound of the peak, which the tables mark with ">=" (a ViP-Large
few-shot job: 6,246 MB sampled, 7,482 MB peak). A job whose log ends with a `peak RSS: <MB>`
line (the kernel's high-water mark, `getrusage`) is shown with that exact peak instead.

    python -m dpvip.report.jobs.smoke [WORKDIR] [--out TABLE.md]
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from dpvip.errors import DpvipInputError
from dpvip.logs import PEAK_RSS_PREFIX

BENCHMARKS = Path("results") / "benchmarks"
DENSE_SAMPLING_SECONDS = 15.0  # Snakemake samples a job every 0.5 s this long, then every 30 s
# A job's block in Snakemake's log: "[local]rule <name>:" then indented "key: value" lines.
_JOB_BLOCK = re.compile(r"^(?:local)?rule (?P<rule>\w+):\n(?P<body>(?:    .*\n?)*)", re.M)
_FIELD = re.compile(r"^    (?P<key>\w+): (?P<value>.*)$", re.M)
_FINISHED = re.compile(r"^Finished jobid: (?P<jobid>\d+) \(Rule: (?P<rule>\w+)\)", re.M)
_EXACT_PEAK = re.compile(rf"^{re.escape(PEAK_RSS_PREFIX)} (?P<mb>[0-9.]+) MB", re.M)  # a job log's closing line


@dataclass(frozen=True)
class PlannedJob:
    jobid: int
    rule: str
    benchmark: str | None  # path relative to the working directory; None: the rule has none (`all`)
    log: str | None = None


@dataclass(frozen=True)
class SmokeJob:
    rule: str
    job: str  # the benchmark's path under results/benchmarks, without .tsv
    max_rss_mb: float | None  # sampled by Snakemake; None: no sample (the job ended within its first)
    seconds: float
    cpu_seconds: float | None
    exact_rss_mb: float | None = None  # the peak its log reports, if it does

    @property
    def peak_rss_mb(self) -> float | None:
        return self.exact_rss_mb if self.exact_rss_mb is not None else self.max_rss_mb

    @property
    def rss_is_lower_bound(self) -> bool:
        """True when the peak is Snakemake's sample and it sampled the job only every 30 s for
        part of its run."""
        return self.exact_rss_mb is None and self.seconds > DENSE_SAMPLING_SECONDS


def planned_jobs(log_text: str) -> dict[int, PlannedJob]:
    """{job id: job} of every job a Snakemake run log started."""
    jobs = {}
    for block in _JOB_BLOCK.finditer(log_text):
        fields = {m["key"]: m["value"].strip() for m in _FIELD.finditer(block["body"])}
        if "jobid" in fields:
            jobid = int(fields["jobid"])
            jobs[jobid] = PlannedJob(jobid, block["rule"], fields.get("benchmark"), fields.get("log"))
    return jobs


def finished_jobs(log_text: str) -> dict[int, str]:
    """{job id: rule} of every job the run log says finished."""
    return {int(m["jobid"]): m["rule"] for m in _FINISHED.finditer(log_text)}


def last_run_log(workdir: str | Path) -> Path:
    """The newest Snakemake log in `workdir` in which jobs finished: not that of a dry run, nor
    of the `--report` run the bundle's report job makes in the same folder."""
    logs = sorted((Path(workdir) / ".snakemake" / "log").glob("*.snakemake.log"), key=lambda path: path.stat().st_mtime)
    for log in reversed(logs):
        if finished_jobs(log.read_text(errors="replace")):
            return log
    raise DpvipInputError(f"no Snakemake run log with jobs in {Path(workdir) / '.snakemake' / 'log'}: run it first")


def read_record(path: Path) -> dict:
    """The last row of a benchmark file: seconds, peak RSS and CPU seconds (None where NA)."""
    with path.open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    if not rows:
        raise DpvipInputError(f"benchmark file {path} has no record")

    def number(key: str) -> float | None:
        value = rows[-1].get(key, "NA")
        return None if value in ("NA", "", None) else float(value)

    return {"seconds": number("s"), "max_rss_mb": number("max_rss"), "cpu_seconds": number("cpu_time")}


def exact_peak_mb(log: Path) -> float | None:
    """The `peak RSS: <MB>` a job log ends with, or None (no such line, or no log)."""
    if not log.is_file():
        return None
    found = _EXACT_PEAK.findall(log.read_text(errors="replace"))
    return float(found[-1]) if found else None


def benchmark_peak_mb(benchmark: str | Path, log: str | Path | None = None) -> float | None:
    """A finished job's peak RSS: the exact one its `log` ends with, else Snakemake's sampled
    `max_rss` from its `benchmark` file; None when the job has not run or was not sampled."""
    benchmark = Path(benchmark)
    if not benchmark.is_file():
        return None
    exact = exact_peak_mb(Path(log)) if log else None
    if exact is not None:
        return exact
    try:
        return read_record(benchmark)["max_rss_mb"]
    except DpvipInputError:  # an empty file: the job has not finished
        return None


def smoke_jobs(workdir: str | Path, log: str | Path | None = None) -> list[SmokeJob]:
    """Every finished job of the run in `log` (default: the last one in `workdir`) that has a
    benchmark file, in the order they finished; refuses a finished job whose file is missing."""
    workdir = Path(workdir)
    text = Path(log or last_run_log(workdir)).read_text(errors="replace")
    planned = planned_jobs(text)
    rows = []
    for jobid in finished_jobs(text):
        job = planned[jobid]
        if job.benchmark is None:
            continue
        path = workdir / job.benchmark
        if not path.is_file():
            raise DpvipInputError(f"job {jobid} ({job.rule}) finished without its benchmark file {path}")
        record = read_record(path)
        name = Path(job.benchmark).relative_to(BENCHMARKS).with_suffix("").as_posix()
        exact = exact_peak_mb(workdir / job.log) if job.log else None
        rows.append(SmokeJob(job.rule, name, record["max_rss_mb"], record["seconds"], record["cpu_seconds"], exact))
    return rows


def rule_summary(jobs: list[SmokeJob]) -> list[dict]:
    """Per rule, heaviest first: jobs, the largest peak RSS and its job, total and largest seconds."""
    summary = []
    for rule in dict.fromkeys(job.rule for job in jobs):
        members = [job for job in jobs if job.rule == rule]
        measured = [job for job in members if job.peak_rss_mb is not None]
        heaviest = max(measured, key=lambda job: job.peak_rss_mb) if measured else None
        summary.append(
            {
                "rule": rule,
                "jobs": len(members),
                "peak_rss_mb": heaviest.peak_rss_mb if heaviest else None,
                "peak_job": heaviest.job if heaviest else None,
                "peak_is_lower_bound": heaviest.rss_is_lower_bound if heaviest else False,
                "seconds": round(sum(job.seconds for job in members), 1),
                "slowest_seconds": max(job.seconds for job in members),
            }
        )
    return sorted(summary, key=lambda row: -(row["peak_rss_mb"] or 0))


def _mb(value: float | None, lower_bound: bool = False) -> str:
    return "NA" if value is None else f"{'>=' if lower_bound else ''}{value:.0f}"


def _seconds(value: float | None) -> str:
    return "NA" if value is None else f"{value:.1f}"


def format_jobs(jobs: list[SmokeJob]) -> str:
    """The per-job table (Markdown), by rule then job."""
    lines = ["| rule | job | peak RSS MB | seconds | CPU seconds |", "|---|---|---:|---:|---:|"]
    for job in sorted(jobs, key=lambda job: (job.rule, job.job)):
        lines.append(
            f"| {job.rule} | {job.job} | {_mb(job.peak_rss_mb, job.rss_is_lower_bound)} "
            f"| {_seconds(job.seconds)} | {_seconds(job.cpu_seconds)} |"
        )
    return "\n".join(lines)


def format_summary(jobs: list[SmokeJob]) -> str:
    """The per-rule table (Markdown), heaviest peak RSS first."""
    lines = [
        "| rule | jobs | peak RSS MB | heaviest job | seconds (all jobs) | slowest job s |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for row in rule_summary(jobs):
        lines.append(
            f"| {row['rule']} | {row['jobs']} | {_mb(row['peak_rss_mb'], row['peak_is_lower_bound'])} "
            f"| {row['peak_job'] or ''} "
            f"| {row['seconds']:.1f} | {row['slowest_seconds']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dpvip.report.jobs.smoke", description="Peak RSS and seconds per job of the last Snakemake run."
    )
    parser.add_argument("workdir", nargs="?", default=".", help="the run's working directory (default: .)")
    parser.add_argument("--out", help="also write the tables to this Markdown file")
    args = parser.parse_args(argv)
    try:
        jobs = smoke_jobs(args.workdir)
    except DpvipInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    text = f"{format_summary(jobs)}\n\n{format_jobs(jobs)}\n"
    if args.out:
        Path(args.out).write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
