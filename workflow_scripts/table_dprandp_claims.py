"""results/tables/dprandp_claims.{csv,md,tex}: DP-RandP's qualitative claims on our runs."""

from dpvip.logs import workflow_job
from dpvip.report.dprandp_tables import read_results
from dpvip.report.dprandp_claims import claims_table
from dpvip.report.privacy_notes import randomness_notes
from dpvip.report.tables import write_table

with workflow_job(snakemake.log[0]):
    p = snakemake.params
    results = read_results(p.runs, snakemake.input.results)
    frame, title, notes = claims_table(p.plan, results, p.scale)
    write_table(frame, snakemake.output[0], title, notes + randomness_notes(results.values()))
