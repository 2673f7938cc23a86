"""Render the Snakemake HTML report from inside a running workflow.

The report is produced by a second, read-only Snakemake invocation (`--report`, no lock)
on the same Snakefile, working directory and resolved configuration, restricted to the
given targets so it does not wait for the bundle that contains it. Its opening page is
`front` (reStructuredText) where given: the Snakefile's `report:` reads it from
DPVIP_REPORT_FRONT.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml


FRONT_VARIABLE = "DPVIP_REPORT_FRONT"


def render_report(
    snakefile: str, workdir: str, config: dict, targets: list[str], report: str, front: str | None = None
) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        yaml.safe_dump(config, handle)
        configfile = handle.name
    environment = dict(os.environ)
    if front is not None:
        with tempfile.NamedTemporaryFile("w", suffix=".rst", delete=False) as handle:
            handle.write(front)
            environment[FRONT_VARIABLE] = handle.name
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
        subprocess.run(command, check=True, stdout=sys.stdout, stderr=sys.stderr, env=environment)
    finally:
        Path(configfile).unlink(missing_ok=True)
        if front is not None:
            Path(environment[FRONT_VARIABLE]).unlink(missing_ok=True)
