"""One ViP evaluation (linear probe, few-shot, COCO, ADE20K or DP fine-tuning) of one backbone,
in this process or, when the job has several processes, under torchrun (on Slurm, srun starts
one torchrun per node of the job)."""

from pathlib import Path

import torch

from dpvip.cli.evaluate import evaluation_settings
from dpvip.evaluate.jobs import run_evaluation
from dpvip.files import private_work_dir
from dpvip.logs import workflow_job
from dpvip.train.launch import run_torchrun_with_settings

with workflow_job(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    evaluation, section, out = snakemake.params.evaluation, snakemake.params.section, snakemake.output[0]
    checkpoint = snakemake.input.checkpoint[0] if snakemake.input.checkpoint else None
    standin = snakemake.input.get("standin")
    folder = str(Path(standin[0]).parent) if standin else None
    if snakemake.params.processes * snakemake.params.nodes == 1:
        run_evaluation(evaluation, section, checkpoint, out, folder)
    else:
        arguments = [
            "--out",
            out,
            *(["--checkpoint", checkpoint] if checkpoint else []),
            *(["--standin", folder] if folder else []),
        ]
        values = evaluation_settings(evaluation, section)
        run_torchrun_with_settings(
            snakemake.params.processes, ["evaluate", "run"], private_work_dir(out), values, arguments
        )
