"""Download a URL list with img2dataset into LAION-format shards beside the index, and index
them with the download's failures. A rerun resumes (img2dataset skips finished shards)."""

from pathlib import Path

from dpvip.data.laion import IngestSettings, ingest
from dpvip.data.shard_index import summary
from dpvip.logs import workflow_job

with workflow_job(snakemake.log[0]):
    settings = IngestSettings(**snakemake.params.settings)
    out = Path(snakemake.output[0]).parent
    index = ingest(snakemake.params.url_list, out, settings, checksums=snakemake.params.checksums)
    print(f"{snakemake.output[0]}: {summary(index)}")
