"""Assemble results/bundle/: tables, figures, report, provenance.json, the privacy statement
(PRIVACY.md, privacy.json), MANIFEST.sha256."""

from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.bundle import build_bundle

with workflow_job(snakemake.log[0]):
    build_bundle(
        Path(snakemake.output[0]).parent,
        {"tables": snakemake.input.tables, "figures": snakemake.input.figures, "report": snakemake.input.report},
        snakemake.params.config,
        snakemake.params.workflow_dir,
        snakemake.params.benchmarks,
        snakemake.params.privacy_sources,
    )
