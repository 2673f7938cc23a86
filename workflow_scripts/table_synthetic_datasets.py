"""results/tables/synthetic_datasets.{csv,md,tex}: the generated datasets and their stand-ins."""

from pathlib import Path

import pandas as pd

from dpvip.logs import workflow_job
from dpvip.report.common.tables import write_table
from dpvip.synthetic.summary import dataset_row, summary_notes

with workflow_job(snakemake.log[0]):
    rows = []
    for index in snakemake.input.indexes:
        dataset = Path(index).parent.name
        benchmarks = [b for b in snakemake.input.benchmarks if Path(b).parent.name == dataset]
        rows.append(dataset_row(index, benchmarks))
    write_table(pd.DataFrame(rows), snakemake.output[0], "Synthetic datasets", summary_notes(snakemake.params.scale))
