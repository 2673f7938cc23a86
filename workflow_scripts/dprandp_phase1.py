"""DP-RandP Phase I: contrastive pre-training on synthetic images, results/dprandp/phase1/<name>/."""

from pathlib import Path

import torch

from dpvip.logs import workflow_job
from dpvip.randp.jobs import run_phase1_job

with workflow_job(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    p = snakemake.params
    run_phase1_job(p.run, p.section, snakemake.input.index, Path(snakemake.output.model).parent)
