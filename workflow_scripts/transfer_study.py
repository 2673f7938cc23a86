"""results/dp_transfer/<study>.json: every linear-head run of one table or figure, on cached features."""

import torch

from dpvip.logs import workflow_job
from dpvip.transfer.jobs import run_study, study_runs

with workflow_job(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    study = snakemake.wildcards.study
    run_study(
        study,
        study_runs(snakemake.config, study, snakemake.params.runs_digest),
        snakemake.params.caches,
        snakemake.output[0],
        selection=snakemake.params.selection,
    )
