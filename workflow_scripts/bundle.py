"""Assemble results/bundle/: tables, figures, report, provenance.json, the privacy statement
(PRIVACY.md, privacy.json), MANIFEST.sha256."""

from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.bundle.build import build_bundle
from dpvip.report.bundle.front_page import bundle_readme

import pandas as pd

with workflow_job(snakemake.log[0]):
    claims = next(path for path in snakemake.input.tables if Path(path).name == "claims.csv")
    build_bundle(
        Path(snakemake.output[0]).parent,
        {"tables": snakemake.input.tables, "figures": snakemake.input.figures, "report": snakemake.input.report},
        snakemake.params.config,
        snakemake.params.workflow_dir,
        snakemake.params.benchmarks,
        snakemake.params.privacy_sources,
        readme=bundle_readme(pd.read_csv(claims, keep_default_na=False), snakemake.params.scale),
    )
