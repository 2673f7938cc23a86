"""results/tables/vip_table3.{csv,md,tex}: MAE sizes and parameter counts beside ViP Table 3."""

from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.vip.model_tables import NOTES, vip_table3
from dpvip.report.common.paper_values import load_paper_values
from dpvip.report.common.tables import write_table

with workflow_job(snakemake.log[0]):
    values = load_paper_values(Path(snakemake.input[0]).parent)
    extra = {model: (snakemake.params.image_size, snakemake.params.patch_size) for model in snakemake.params.models}
    table = vip_table3(values, extra)
    write_table(table, snakemake.output[0], "ViP Table 3: MAE backbones", NOTES)
