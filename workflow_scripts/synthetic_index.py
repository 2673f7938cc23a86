"""Index a synthetic dataset: per-shard sample counts, index ranges and SHA-256."""

from dpvip.logs import logging_to
from dpvip.files import write_json
from dpvip.synthetic.shards import build_index
from dpvip.synthetic.spec import DatasetSpec

with logging_to(snakemake.log[0]):
    spec = DatasetSpec.from_config(snakemake.wildcards.dataset, snakemake.params.spec)
    write_json(build_index(spec, list(snakemake.input)), snakemake.output[0])
