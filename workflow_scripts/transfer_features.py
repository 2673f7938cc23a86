"""results/dp_transfer/features/<backbone>/<dataset>/<recipe>_<crop><size>: one feature cache."""

import torch

from dpvip.logs import workflow_job
from dpvip.transfer.jobs import build_feature_cache

with workflow_job(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    p = snakemake.params
    build_feature_cache(p.feature_set, p.kind, snakemake.input.checkpoint, p.dataset, p.section, snakemake.output[0])
