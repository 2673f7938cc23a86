"""DP-RandP Phases II and III of one run: results/dprandp/private/<task>/<init>/<run>.json."""

import torch

from dpvip.logs import workflow_job
from dpvip.randp.jobs import run_private_job

with workflow_job(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    init = snakemake.input.init[0] if snakemake.input.init else None
    p = snakemake.params
    run_private_job(p.run, p.settings, p.data, init, snakemake.output[0])
