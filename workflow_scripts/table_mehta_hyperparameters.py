"""results/tables/mehta_<table>.{csv,md,tex} for Mehta et al.'s hyper-parameter Tables 6-9: the
paper's settings beside ours (our backbones' pre-training from the config, or the settings our
Table 1 or 2 runs recorded)."""

import json
from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.mehta.hyperparameters import hyperparameter_table, load_paper_settings
from dpvip.report.common.paper_values import load_paper_values
from dpvip.report.privacy.notes import privacy_notes
from dpvip.report.common.tables import write_table

with workflow_job(snakemake.log[0]):
    p = snakemake.params
    values = load_paper_values(Path(snakemake.input.paper_values).parent)
    studies = [json.loads(Path(path).read_text()) for path in snakemake.input.studies]
    frame, title, notes = hyperparameter_table(
        snakemake.wildcards.table,
        studies[0] if studies else None,
        values,
        load_paper_settings(snakemake.input.paper_settings),
        p.section,
        p.stages,
        p.scale,
    )
    write_table(frame, snakemake.output[0], title, notes + privacy_notes(studies))
