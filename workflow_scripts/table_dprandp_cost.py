"""results/tables/dprandp_<table8|table9>.{csv,md,tex}: DP-RandP's computational cost, the
paper's times beside ours (Phase I metrics, feature-cache benchmarks, probe and private runs)."""

import json
import os
from pathlib import Path

from dpvip.files import read_benchmark
from dpvip.logs import workflow_job
from dpvip.report.dprandp.costs import CostInputs, cost_table
from dpvip.report.dprandp.tables import read_results
from dpvip.report.common.paper_values import load_paper_values
from dpvip.report.common.tables import write_table
from dpvip.train.metrics import read_metrics

with workflow_job(snakemake.log[0]):
    p, files = snakemake.params, snakemake.input
    inputs = CostInputs(
        phase1={name: read_metrics(path) for name, path in zip(p.phase1, files.phase1, strict=True)},
        feature_seconds={
            name: read_benchmark(path)["seconds"] for name, path in zip(p.features, files.features, strict=True)
        },
        results=read_results(p.runs, files.results),
        probe=json.loads(Path(files.probe[0]).read_text()) if files.probe else None,
    )
    values = load_paper_values(Path(files.paper_values).parent)
    # A local rule: it runs where the embedded jobs ran (GPU runs on a cluster say their GPUs instead).
    frame, title, notes = cost_table(snakemake.wildcards.table, p.plan, inputs, values, p.scale, os.cpu_count())
    write_table(frame, snakemake.output[0], title, notes)
