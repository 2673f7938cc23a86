"""Render the Snakemake report of the bundled tables and figures (a nested, read-only run),
opening with the claims overview and the coverage counts."""

from pathlib import Path

import pandas as pd

from dpvip.logs import workflow_job
from dpvip.report.bundle.front_page import report_front
from dpvip.report.bundle.snakemake_report import render_report

with workflow_job(snakemake.log[0]):
    claims = pd.read_csv(snakemake.input.claims, keep_default_na=False)
    render_report(
        snakefile=snakemake.params.snakefile,
        workdir=snakemake.params.workdir,
        config=snakemake.params.config,
        targets=[*snakemake.input.tables, *snakemake.input.figures],
        report=snakemake.output[0],
        front=report_front(Path(snakemake.params.intro).read_text(), claims),
    )
