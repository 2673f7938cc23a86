"""Index a synthetic dataset: per-shard sample counts, index ranges and SHA-256."""

from dpvip.logs import workflow_job
from dpvip.files import write_json
from dpvip.synthetic.shards import build_index
from dpvip.synthetic.spec import DatasetSpec

with workflow_job(snakemake.log[0]):
    spec = DatasetSpec.from_config(snakemake.wildcards.dataset, snakemake.params.spec)
    write_json(build_index(spec, list(snakemake.input)), snakemake.output[0])
