"""results/tables/<paper>_<table>.{csv,md,tex}: a Mehta et al. table, or one of DP-RandP's
private linear probing, from its DP transfer study; the paper's values beside ours."""

import json
from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.dprandp.probe_tables import probe_table
from dpvip.report.privacy.grid import grid_notes
from dpvip.report.mehta.tables import mehta_table
from dpvip.report.common.paper_values import load_paper_values
from dpvip.report.privacy.notes import privacy_notes
from dpvip.report.common.tables import write_table

BUILDERS = {"mehta": mehta_table, "dprandp": probe_table}

with workflow_job(snakemake.log[0]):
    p = snakemake.params
    values = load_paper_values(Path(snakemake.input.paper_values).parent)
    results = json.loads(Path(snakemake.input.results).read_text())
    frame, title, notes = BUILDERS[p.paper](snakemake.wildcards.table, results, values, p.section, p.scale)
    grids = grid_notes([results]) if p.paper == "mehta" else []  # the learning rate is picked on test accuracy
    write_table(frame, snakemake.output[0], title, notes + grids + privacy_notes([results]))
