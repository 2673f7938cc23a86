"""results/figures/dprandp_<figure>.{png,pdf}: a DP-RandP figure, the paper's numbers beside ours."""

from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.dprandp.tables import read_results
from dpvip.report.dprandp import budget_figures as dprandp_budget_figures
from dpvip.report.dprandp import figures as dprandp_figures
from dpvip.report.common.figures import save_figure
from dpvip.report.common.paper_values import load_paper_values

with workflow_job(snakemake.log[0]):
    p = snakemake.params
    values = load_paper_values(Path(snakemake.input.paper_values).parent)
    results = read_results(p.runs, snakemake.input.results)
    # Figures 6 and 7 (the budget's share) account in their own module; 2, 4 and 5 stay light
    draw = getattr(dprandp_budget_figures, snakemake.wildcards.figure, None) or getattr(
        dprandp_figures, snakemake.wildcards.figure
    )
    save_figure(draw(p.plan, results, values, p.scale), snakemake.output[0], results.values())
