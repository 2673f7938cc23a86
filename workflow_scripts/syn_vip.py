"""One (Syn)-ViP run: MAE pre-training on synthetic shards, in this process or under torchrun."""

from pathlib import Path

import torch

from dpvip.logs import workflow_job
from dpvip.train.launch import run_torchrun_with_settings
from dpvip.train.mae_pretrain import pretrain_mae
from dpvip.plan.pretrain import PretrainSettings, training_values

with workflow_job(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    model, run = snakemake.params.size, Path(snakemake.params.run)
    values = training_values(snakemake.params.settings)
    if snakemake.params.processes * snakemake.params.nodes == 1:
        pretrain_mae(PretrainSettings.from_config(values, model), snakemake.input.index, run)
    else:  # one process per GPU, on every node of the job
        arguments = ["--size", model, "--data", snakemake.input.index, "--out", str(run)]
        run_torchrun_with_settings(snakemake.params.processes, ["pretrain", "mae"], run, values, arguments)
