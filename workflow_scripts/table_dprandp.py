"""results/tables/dprandp_<table>.{csv,md,tex}: one DP-RandP table, the paper's values beside ours."""

from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.dprandp.tables import read_results
from dpvip.report.dprandp.tables import dprandp_table
from dpvip.report.common.paper_values import load_paper_values
from dpvip.report.privacy.notes import privacy_notes
from dpvip.report.common.tables import write_table

with workflow_job(snakemake.log[0]):
    p = snakemake.params
    values = load_paper_values(Path(snakemake.input.paper_values).parent)
    results = read_results(p.runs, snakemake.input.results)
    frame, title, notes = dprandp_table(snakemake.wildcards.table, p.plan, results, values, p.scale)
    write_table(frame, snakemake.output[0], title, notes + privacy_notes(results.values()))
