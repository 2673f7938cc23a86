"""The contact sheet of synthetic samples: the first images of each dataset's first shard."""

from dpvip.logs import workflow_job
from dpvip.report.common.figures import save_figure
from dpvip.report.common.synthetic_figures import contact_sheet
from dpvip.synthetic.shards import read_images

with workflow_job(snakemake.log[0]):
    rows = []
    for name, shard in zip(snakemake.params.datasets, snakemake.input):
        samples = list(read_images(shard, limit=snakemake.params.per_dataset))
        meta = samples[0][1]
        family = "" if meta["family"] == name else f"{meta['family']}, "
        rows.append((f"{name}\n{family}{meta['resolution']} px", samples))
    save_figure(contact_sheet(rows), snakemake.output[0])
