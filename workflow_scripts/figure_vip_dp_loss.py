"""One of ViP's DP training-loss figures (3a, 3b, 4a, 4b, 7) from its runs' metrics and ledgers."""

import json
from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.vip.dp_figures import dp_loss_figure
from dpvip.report.common.figures import save_figure
from dpvip.train.metrics import read_metrics

with workflow_job(snakemake.log[0]):
    ledgers = [Path(path) for path in snakemake.input if path.endswith("privacy.json")]
    runs = {
        path.parent.name: (json.loads(path.read_text()), read_metrics(path.parent / "metrics.jsonl"))
        for path in ledgers
    }
    epsilons = {privacy["target_epsilon"] for privacy, _ in runs.values()}
    note = f" (ε={epsilons.pop():g})" if len(epsilons) == 1 else ""
    note += f"\n{snakemake.params.data}"
    save_figure(dp_loss_figure(snakemake.wildcards.figure, runs, note), snakemake.output[0], runs.values())
