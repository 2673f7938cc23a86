"""results/tables/privacy_empirical.{csv,md,tex}: each audited mechanism's claimed epsilon
beside the lower bounds of its canaries."""

import json
from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.privacy.empirical import empirical_table
from dpvip.report.common.tables import write_table

with workflow_job(snakemake.log[0]):
    records = [json.loads(Path(path).read_text()) for path in snakemake.input]
    frame, title, notes = empirical_table(records)
    write_table(frame, snakemake.output[0], title, notes)
