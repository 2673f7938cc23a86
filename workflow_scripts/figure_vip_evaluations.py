"""results/figures/vip_figure1 and vip_figure5: ViP's downstream figures from evaluation results."""

import json
from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.common.figures import save_figure
from dpvip.report.vip.model_tables import trainable_millions
from dpvip.report.common.paper_values import load_paper_values, paper_table
from dpvip.report.vip.eval_figures import figure1, figure5
from dpvip.plan.vip_rows import figure5_backbones
from dpvip.report.vip.tables import ours_by_backbone

with workflow_job(snakemake.log[0]):
    values = load_paper_values(Path(snakemake.input.paper_values).parent)
    results = [json.loads(Path(path).read_text()) for path in snakemake.input.results]
    ours = ours_by_backbone(results)
    plan = snakemake.params.plan
    scale = snakemake.params.scale
    if snakemake.wildcards.figure == "vip_figure1":
        figure = figure1(values, results, plan.largest_vip(), plan.backbones.main_vip, scale)
    else:
        shapes = snakemake.params.shapes
        lines = {
            init: {trainable_millions(*shapes[run]): ours.get(run, {}) for run in runs}
            for init, runs in figure5_backbones(plan.backbones).items()
        }
        table9 = paper_table(values, "vip", "table9")
        paper = {
            m: {table9.at[r, "# parameters"]: table9.at[r, m] for r in ("ViP-S", "ViP-B", "ViP-L")}
            for m in plan.figure5_metrics()
            if m in table9.columns
        }
        figure = figure5(lines, plan.figure5_metrics(), results, paper, scale)
    ledgers = [json.loads(Path(path).read_text()) for path in snakemake.input.ledgers]
    save_figure(figure, snakemake.output[0], ledgers)
