"""Render the Snakemake report of the bundled tables and figures (a nested, read-only run)."""

from dpvip.logs import workflow_job
from dpvip.report.snakemake_report import render_report

with workflow_job(snakemake.log[0]):
    render_report(
        snakefile=snakemake.params.snakefile,
        workdir=snakemake.params.workdir,
        config=snakemake.params.config,
        targets=list(snakemake.input),
        report=snakemake.output[0],
    )
