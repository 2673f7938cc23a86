"""results/figures/mehta_<figure>.{png,pdf}: a Mehta et al. figure from our runs."""

import json
from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report import mehta_figures
from dpvip.report.figures import save_figure

with workflow_job(snakemake.log[0]):
    p = snakemake.params
    results = json.loads(Path(snakemake.input.results).read_text())
    draw = getattr(mehta_figures, snakemake.wildcards.figure)
    save_figure(draw(results, p.section, p.scale), snakemake.output[0])
