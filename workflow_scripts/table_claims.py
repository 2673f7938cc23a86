"""results/tables/claims.{csv,md,tex}: every paper's claims and our verdicts, in one table."""

import pandas as pd

from dpvip.logs import workflow_job
from dpvip.report.claims.catalogue import overview_table
from dpvip.report.common.tables import write_table

with workflow_job(snakemake.log[0]):
    tables = {
        paper: pd.read_csv(path, keep_default_na=False)
        for paper, path in zip(snakemake.params.papers, snakemake.input, strict=True)
    }
    frame, title, notes = overview_table(tables, snakemake.params.scale)
    write_table(frame, snakemake.output[0], title, notes)
