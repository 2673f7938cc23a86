"""results/figures/mehta_<figure>.{png,pdf}: a Mehta et al. figure from our runs, with the
paper's values where it prints any."""

import json
from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.mehta import figures as mehta_figures
from dpvip.report.common.figures import save_figure
from dpvip.report.common.paper_values import load_paper_values

with workflow_job(snakemake.log[0]):
    p = snakemake.params
    results = json.loads(Path(snakemake.input.results).read_text())
    values = load_paper_values(Path(snakemake.input.paper_values).parent)
    figure = mehta_figures.draw(snakemake.wildcards.figure, results, p.section, p.scale, values)
    save_figure(figure, snakemake.output[0], [results])
