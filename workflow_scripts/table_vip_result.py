"""results/tables/vip_table<N>.{csv,md,tex}: one ViP result table, the paper's values beside ours."""

import json
from pathlib import Path

from dpvip.logs import workflow_job
from dpvip.report.common.paper_values import load_paper_values
from dpvip.report.privacy.notes import privacy_notes
from dpvip.report.common.tables import write_table
from dpvip.plan.vip_rows import table_rows
from dpvip.report.vip.readings import label_random_baselines, reading_notes, with_trivial_row
from dpvip.report.vip.tables import TITLES, ours_by_backbone, run_facts, selection_notes, stand_in_notes, vip_table

with workflow_job(snakemake.log[0]):
    table, backbones = snakemake.wildcards.table, snakemake.params.backbones
    values = load_paper_values(Path(snakemake.input.paper_values).parent)
    results = [json.loads(Path(path).read_text()) for path in snakemake.input.results]
    privacy = {Path(path).parent.name: json.loads(Path(path).read_text()) for path in snakemake.input.privacy}
    examples = {name: ledger["examples"] for name, ledger in privacy.items()}
    rows = table_rows(table, snakemake.params.columns, backbones, examples)
    mine = {backbone for row in rows for backbone, _ in row.cells.values()}
    parameters = {}
    if table == "vip_table9":  # builds networks (on the meta device): only this table needs torch
        from dpvip.report.vip.model_tables import trainable_millions

        parameters = {b: trainable_millions(*shape) for b, shape in snakemake.params.shapes.items() if b in mine}
    ours = ours_by_backbone(results)
    for backbone, facts in run_facts(backbones.runs, privacy, parameters, snakemake.params.synthetic_images).items():
        ours.setdefault(backbone, {}).update(facts)
    frame = label_random_baselines(vip_table(table, values, rows, ours), results)
    frame = with_trivial_row(frame, results, snakemake.params.columns)
    notes = stand_in_notes(results, snakemake.params.scale) + selection_notes(results)
    notes += reading_notes(results, snakemake.params.columns)
    write_table(frame, snakemake.output[0], TITLES[table], notes + privacy_notes([results, privacy]))
