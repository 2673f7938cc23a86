"""Render one shard of a synthetic dataset."""

import torch

from dpvip.logs import workflow_job
from dpvip.synthetic.shards import write_shard
from dpvip.synthetic.spec import DatasetSpec

with workflow_job(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    spec = DatasetSpec.from_config(snakemake.wildcards.dataset, snakemake.params.spec)
    shard = int(snakemake.wildcards.shard.removeprefix("shard-"))
    written = write_shard(spec, shard, snakemake.output[0])
    print(f"{snakemake.output[0]}: {written} images")
