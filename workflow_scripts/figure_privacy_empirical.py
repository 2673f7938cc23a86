"""results/figures/privacy_empirical.{png,pdf}: the audit's lower bounds against the claimed
epsilon of one full-batch DP step."""

import json
from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.common.figures import save_figure
from dpvip.report.privacy.empirical import empirical_figure

with workflow_job(snakemake.log[0]):
    points = json.loads(Path(snakemake.input[0]).read_text())["points"]
    save_figure(empirical_figure(points), snakemake.output[0])
