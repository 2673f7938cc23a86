"""results/privacy/empirical/grid.json: the audit of one full-batch DP step over a grid of
claimed epsilons (delta 1e-6): how close the lower bounds come to the claim."""

import torch

from dpvip.files import write_json
from dpvip.logs import workflow_job
from dpvip.audit.bounds import audit_settings
from dpvip.audit.canaries import audit_grid

with workflow_job(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    settings = snakemake.params.settings
    write_json({"points": audit_grid(settings["grid"], audit_settings(settings))}, snakemake.output[0])
