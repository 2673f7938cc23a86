"""results/tables/mehta_claims.{csv,md,tex}: Mehta et al.'s qualitative claims, with our verdicts."""

import json
from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.mehta.claims import mehta_claims_table
from dpvip.report.privacy.notes import privacy_notes
from dpvip.report.common.tables import write_table

with workflow_job(snakemake.log[0]):
    studies = {Path(path).stem: json.loads(Path(path).read_text()) for path in snakemake.input.studies}
    frame, title, notes = mehta_claims_table(studies, snakemake.params.scale)
    write_table(frame, snakemake.output[0], title, notes + privacy_notes(list(studies.values())))
