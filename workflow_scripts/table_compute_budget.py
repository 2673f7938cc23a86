"""results/tables/compute_budget{,_summary,_papers}.{csv,md,tex}: the compute budget of this
workflow's default target under the running configuration (as `dpvip budget`)."""

import tempfile
from pathlib import Path

import yaml

from dpvip.budget.compute import compute_budget, write_budget_tables
from dpvip.logs import workflow_job

with workflow_job(snakemake.log[0]):
    params = snakemake.params
    # The running config, merged and validated: over the embedded config.yaml it gives itself.
    with tempfile.TemporaryDirectory() as folder:
        merged = Path(folder) / "config.yaml"
        merged.write_text(yaml.safe_dump(params.config))
        budget = compute_budget(
            params.snakefile,
            [merged],
            profile=params.profile,
            data_file=snakemake.input.data,
            smoke_config=params.smoke_config,
            smoke_dir=params.workdir,
            workdir=params.workdir,  # explicit, as the Snakefile: also right where dpvip is a module
        )
    write_budget_tables(budget, Path(snakemake.output[0]).parent)
    for job_budget, check in budget.problems():
        print(f"runtime too short: {job_budget.job.name} ({check.wall_hours:.3g} A100 hours, {check.runtime_hours} h)")
