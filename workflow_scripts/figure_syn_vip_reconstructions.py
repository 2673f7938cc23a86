"""Held-out synthetic images, their masked inputs and each (Syn)-ViP model's reconstruction."""

from pathlib import Path

import numpy as np

from dpvip.logs import workflow_job
from dpvip.report.common.figures import save_figure
from dpvip.report.common.pretrain_figures import reconstruction_panel

with workflow_job(snakemake.log[0]):
    panels = {Path(path).parent.name.removeprefix("syn_vip_"): dict(np.load(path)) for path in snakemake.input}
    save_figure(reconstruction_panel(panels), snakemake.output[0])
