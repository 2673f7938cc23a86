"""One ViP evaluation (linear probe, few-shot, COCO, ADE20K or DP fine-tuning) of one backbone."""

from pathlib import Path

import torch

from dpvip.evaluate.jobs import run_evaluation
from dpvip.logs import workflow_job

with workflow_job(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    checkpoint = snakemake.input.checkpoint[0] if snakemake.input.checkpoint else None
    standin = snakemake.input.get("standin")
    folder = str(Path(standin[0]).parent) if standin else None
    run_evaluation(snakemake.params.evaluation, snakemake.params.section, checkpoint, snakemake.output[0], folder)
