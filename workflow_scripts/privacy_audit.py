"""Audit the privacy claims of one paper (wildcard `paper`) under each accountant."""

import pandas as pd

from dpvip.logs import workflow_job
from dpvip.audit.claim_check import audit_claims
from dpvip.audit.claims import load_claims

with workflow_job(snakemake.log[0]):
    claims = load_claims(snakemake.input.claims, papers=[snakemake.wildcards.paper])
    rows = audit_claims(claims, tuple(snakemake.params.accountants))
    pd.DataFrame(rows).to_csv(snakemake.output[0], index=False)
