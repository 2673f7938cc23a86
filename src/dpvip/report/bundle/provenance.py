"""What produced a bundle: code version, configuration, packages, hardware, timings."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from dpvip.files import read_benchmark

PACKAGES = (
    "dpvip",
    "torch",
    "torchvision",
    "timm",
    "opacus",
    "dp-accounting",
    "webdataset",
    "numpy",
    "scipy",
    "pandas",
    "matplotlib",
    "pycocotools",
    "scikit-learn",
    "scikit-image",
    "snakemake",
    "snakemake-executor-plugin-slurm",
    "img2dataset",
)


def _git(workflow_dir: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(workflow_dir), *args], capture_output=True, text=True, check=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def code_version(workflow_dir: Path) -> dict:
    commit = _git(workflow_dir, "rev-parse", "HEAD")
    status = _git(workflow_dir, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def package_versions() -> dict:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def hardware() -> dict:
    info = {
        "machine": platform.machine(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "gpus": [],
    }
    info["gpus"] = gpu_names()
    return info


def gpu_names() -> list[str]:
    """The GPUs the NVIDIA driver lists (`nvidia-smi -L`), without importing torch: the bundle
    job is a light local job. None found, no driver or a broken one: an empty list."""
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    # "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)"
    return [line.split(":", 1)[1].split("(UUID")[0].strip() for line in listed.splitlines() if line.startswith("GPU ")]


def _benchmarks(benchmarks_dir: Path) -> list[tuple[Path, dict]]:
    """Every readable Snakemake `benchmark:` file under `benchmarks_dir`, with its record."""
    records = ((path, read_benchmark(path)) for path in sorted(benchmarks_dir.rglob("*.tsv")))
    return [(path, record) for path, record in records if record is not None]


def rule_timings(benchmarks_dir: Path, benchmarks: list[tuple[Path, dict]] | None = None) -> list[dict]:
    """One entry per Snakemake `benchmark:` file: job, wall seconds, peak RSS (MB)."""
    benchmarks = _benchmarks(benchmarks_dir) if benchmarks is None else benchmarks
    return [
        {"job": path.relative_to(benchmarks_dir).with_suffix("").as_posix(), **record} for path, record in benchmarks
    ]


def run_started(benchmarks_dir: Path, benchmarks: list[tuple[Path, dict]] | None = None) -> str | None:
    """When the first job behind the results began (the Workflow Run Crate's startTime):
    Snakemake records no run start, but each `benchmark:` file is written as its job ends,
    after the wall seconds it holds. None without benchmarks."""
    benchmarks = _benchmarks(benchmarks_dir) if benchmarks is None else benchmarks
    starts = [path.stat().st_mtime - record["seconds"] for path, record in benchmarks]
    if not starts:
        return None
    return dt.datetime.fromtimestamp(min(starts), dt.timezone.utc).isoformat(timespec="seconds")


def provenance(config: dict, workflow_dir: str | Path, benchmarks_dir: str | Path) -> dict:
    benchmarks_dir = Path(benchmarks_dir)
    benchmarks = _benchmarks(benchmarks_dir)  # read once: the timings and the run's start
    return {
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "started": run_started(benchmarks_dir, benchmarks),
        "code": code_version(Path(workflow_dir)),
        "config": config,
        "packages": package_versions(),
        "hardware": hardware(),
        "timings": rule_timings(benchmarks_dir, benchmarks),
    }
