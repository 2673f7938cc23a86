"""results/tables/dprandp_claims.{csv,md,tex}: DP-RandP's qualitative claims on our runs."""

import json
from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.dprandp.tables import read_results
from dpvip.report.dprandp.claims import claims_table
from dpvip.report.privacy.notes import privacy_notes
from dpvip.report.common.tables import write_table

with workflow_job(snakemake.log[0]):
    p = snakemake.params
    results = read_results(p.runs, snakemake.input.results)
    studies = {Path(path).stem: json.loads(Path(path).read_text()) for path in snakemake.input.studies}
    frame, title, notes = claims_table(p.plan, results, p.scale, studies)
    sources = [*results.values(), *studies.values()]
    write_table(frame, snakemake.output[0], title, notes + privacy_notes(sources))
