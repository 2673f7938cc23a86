"""Render the Snakemake HTML report from inside a running workflow.

The report is produced by a second, read-only Snakemake invocation (`--report`, no lock)
on the same Snakefile, working directory and resolved configuration, restricted to the
given targets so it does not wait for the bundle that contains it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import yaml


def render_report(snakefile: str, workdir: str, config: dict, targets: list[str], report: str) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        yaml.safe_dump(config, handle)
        configfile = handle.name
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        snakefile,
        "--directory",
        workdir,
        "--configfile",
        configfile,
        "--nolock",
        "--report",
        str(Path(report).resolve()),
        *targets,
    ]
    try:
        subprocess.run(command, check=True, stdout=sys.stdout, stderr=sys.stderr)
    finally:
        Path(configfile).unlink(missing_ok=True)
