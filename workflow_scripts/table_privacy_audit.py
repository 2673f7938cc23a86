"""Merge the per-paper audits into results/tables/privacy_audit.{csv,md,tex}."""

import pandas as pd

from dpvip.logs import workflow_job
from dpvip.report.privacy.audit import audit_frame, audit_notes
from dpvip.report.common.tables import write_table

with workflow_job(snakemake.log[0]):
    frame = audit_frame([pd.read_csv(path) for path in snakemake.input])
    write_table(frame, snakemake.output[0], "Privacy claims audit: ViP, DP-RandP, Mehta et al.", audit_notes(frame))
