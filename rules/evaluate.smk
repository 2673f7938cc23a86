# ViP's downstream evaluations: one job per (task, backbone, dataset) that a ViP table or
# figure needs (EVALUATIONS, from dpvip.evaluate.plan); each writes a small JSON result.
import re


wildcard_constraints:
    evaluation="|".join(re.escape(path) for path in EVALUATIONS) or "^$",


def evaluation_inputs(wildcards):
    evaluation = EVALUATIONS[wildcards.evaluation]
    inputs = {"checkpoint": backbone_checkpoint(evaluation.backbone)}
    if evaluation.task == "coco" and EVAL["coco"]["source"] == "standin":
        inputs["standin"] = [f"{RESULTS}/data/coco_standin/{split}.json" for split in ("train", "val")]
    return inputs


rule evaluate:
    input:
        unpack(evaluation_inputs),
    output:
        f"{EVALUATE}/{{evaluation}}.json",
    log:
        f"{LOGS}/evaluate/{{evaluation}}.log",
    benchmark:
        f"{BENCHMARKS}/evaluate/{{evaluation}}.tsv"
    conda:
        ENV
    threads: EVAL["threads"]
    resources:
        gpu=EVAL["gpus"],
        runtime=lambda wildcards: EVAL["runtime_minutes"][
            EVALUATIONS[wildcards.evaluation].task
        ],
    params:
        evaluation=lambda wildcards: EVALUATIONS[wildcards.evaluation],
        # only what this job reads, so a change elsewhere in `evaluate` does not rerun it
        section=lambda wildcards: EVAL_PLAN.job_section(EVALUATIONS[wildcards.evaluation]),
    script:
        "../workflow_scripts/evaluate.py"
