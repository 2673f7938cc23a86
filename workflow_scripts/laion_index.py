"""Index the LAION-format shards: the natural stand-in's (checked against its settings) or
existing shards where they lie."""

from dpvip.data.natural import NaturalSpec, index_natural
from dpvip.data.shard_index import find_shards, index_shards, summary
from dpvip.logs import workflow_job

with workflow_job(snakemake.log[0]):
    params, target = snakemake.params, snakemake.output[0]
    if params.source == "natural":
        index = index_natural(NaturalSpec.from_config(params.natural), list(snakemake.input), target, params.checksums)
    else:
        index = index_shards(
            find_shards(params.shards),
            target,
            dataset="laion",
            source="shards",
            location=params.shards,
            checksums=params.checksums,
            threads=params.threads,
        )
    print(f"{target}: {summary(index)}")
