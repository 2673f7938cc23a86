"""Write one shard of the natural-image stand-in for LAION."""

from dpvip.data.natural import NaturalSpec, write_natural_shard
from dpvip.logs import workflow_job

with workflow_job(snakemake.log[0]):
    spec = NaturalSpec.from_config(snakemake.params.natural)
    shard = int(snakemake.wildcards.shard.removeprefix("shard-"))
    written = write_natural_shard(spec, shard, snakemake.output[0])
    print(f"{snakemake.output[0]}: {written} crops")
