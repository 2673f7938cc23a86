"""results/tables/mehta_table10.{csv,md,tex}: Mehta et al.'s DP-LAMB throughput per core beside
the throughput our DP-LAMB runs of Table 2 measured."""

import json
from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.mehta.throughput import throughput_table
from dpvip.report.common.paper_values import load_paper_values
from dpvip.report.privacy.notes import privacy_notes
from dpvip.report.common.tables import write_table

with workflow_job(snakemake.log[0]):
    p = snakemake.params
    values = load_paper_values(Path(snakemake.input.paper_values).parent)
    results = json.loads(Path(snakemake.input.results).read_text())
    frame, title, notes = throughput_table(results, values, p.section, p.scale)
    write_table(frame, snakemake.output[0], title, notes + privacy_notes([results]))
