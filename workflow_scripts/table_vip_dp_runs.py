"""results/tables/vip_dp_runs.{csv,md,tex}: every DP MAE run's mechanism, spent epsilon and
loss, with ViP Table 10's sigma beside ours."""

import json
from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.vip.dp_tables import NOTES, vip_dp_runs
from dpvip.report.common.paper_values import load_paper_values
from dpvip.report.privacy.notes import privacy_notes
from dpvip.report.common.tables import write_table
from dpvip.train.metrics import read_metrics

with workflow_job(snakemake.log[0]):
    runs = {
        Path(path).parent.name: (json.loads(Path(path).read_text()), read_metrics(Path(path).parent / "metrics.jsonl"))
        for path in snakemake.input.privacy
    }
    table = vip_dp_runs(runs, load_paper_values(Path(snakemake.input.paper_values).parent))
    notes = NOTES + privacy_notes(ledger for ledger, _ in runs.values())
    write_table(table, snakemake.output[0], "ViP DP pre-training runs (Table 10's σ beside ours)", notes)
