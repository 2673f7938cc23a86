"""One DP MAE run (ViP step 2), in this process or under torchrun (one process per GPU; on
Slurm, srun starts one torchrun per node of the job)."""

from pathlib import Path

import torch

from dpvip.logs import workflow_job
from dpvip.train.dp_mae import dp_train_mae
from dpvip.plan.dp_pretrain import DPPretrainSettings
from dpvip.train.launch import run_torchrun_with_settings

with workflow_job(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    run, model, values = Path(snakemake.params.run), snakemake.params.model, snakemake.params.settings
    init = snakemake.input.get("init")
    if snakemake.params.processes * snakemake.params.nodes == 1:
        dp_train_mae(DPPretrainSettings.from_config(values, model), snakemake.input.index, run, init)
    else:
        arguments = [
            "--size",
            model,
            "--data",
            snakemake.input.index,
            "--out",
            str(run),
            *(["--init", init] if init else []),
        ]
        run_torchrun_with_settings(snakemake.params.processes, ["pretrain", "dp-mae"], run, values, arguments)
