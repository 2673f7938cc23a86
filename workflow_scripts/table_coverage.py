"""results/tables/coverage.{csv,md,tex}: every numbered table and figure of the three papers,
mapped to our output or to the reason it has none."""

from dpvip.logs import workflow_job
from dpvip.report.bundle.coverage import ITEMS
from dpvip.report.claims.coverage import coverage_table
from dpvip.report.common.tables import write_table

with workflow_job(snakemake.log[0]):
    frame, title, notes = coverage_table(ITEMS)
    write_table(frame, snakemake.output[0], title, notes)
