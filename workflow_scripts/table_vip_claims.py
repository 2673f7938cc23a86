"""results/tables/vip_claims.{csv,md,tex}: ViP's qualitative claims, with our verdicts."""

import json
from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.plan.vip_evaluations import Evaluation
from dpvip.report.privacy.notes import privacy_notes
from dpvip.report.common.tables import write_table
from dpvip.report.vip.claims import vip_claims_table
from dpvip.train.metrics import read_metrics

with workflow_job(snakemake.log[0]):
    results = {}
    for path in snakemake.input.results:
        result = json.loads(Path(path).read_text())
        results[Evaluation(**result["evaluation"]).path] = result
    losses = {
        Path(path).parent.name: [record.get("loss") for record in read_metrics(path)]
        for path in snakemake.input.metrics
    }
    privacy = [json.loads(Path(path).read_text()) for path in snakemake.input.privacy]
    frame, title, notes = vip_claims_table(snakemake.params.plan, results, losses, snakemake.params.scale)
    write_table(frame, snakemake.output[0], title, notes + privacy_notes([list(results.values()), privacy]))
