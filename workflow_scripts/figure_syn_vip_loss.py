"""(Syn)-ViP pre-training loss against epochs, one curve per model."""

from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.common.figures import save_figure
from dpvip.report.common.pretrain_figures import loss_curves
from dpvip.train.metrics import read_metrics

with workflow_job(snakemake.log[0]):
    runs = {Path(path).parent.name.removeprefix("syn_vip_"): read_metrics(path) for path in snakemake.input}
    title = f"(Syn)-ViP: MAE pre-training on '{snakemake.params.dataset}'"
    save_figure(loss_curves(runs, title), snakemake.output[0])
