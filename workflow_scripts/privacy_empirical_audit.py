"""results/privacy/empirical/<mechanism>.json: canaries through one mechanism's DP step (its
accountant, q, sigma, T, C and delta read from one of its runs), and the lower bounds."""

import json
from pathlib import Path

import torch

from dpvip.files import write_json
from dpvip.logs import workflow_job
from dpvip.audit.bounds import audit_settings
from dpvip.audit.canaries import audit_mechanism, mechanism_from_ledger

with workflow_job(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    ledger = json.loads(Path(snakemake.input.ledger).read_text())
    mechanism = mechanism_from_ledger(snakemake.wildcards.mechanism, ledger)
    record = audit_mechanism(mechanism, audit_settings(snakemake.params.settings))
    write_json(record | {"source": snakemake.input.ledger}, snakemake.output[0])
