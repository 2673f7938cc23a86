# ViP's downstream evaluations: one job per (task, backbone, dataset) that a ViP table or
# figure needs (EVALUATIONS, from dpvip.plan.vip_evaluations); each writes a small JSON result.


wildcard_constraints:
    evaluation="|".join(re.escape(path) for path in EVALUATIONS) or "^$",


rule coco_standin:
    output:
        f"{COCO_STANDIN}/{{split}}.json",
    log:
        f"{LOGS}/evaluate/coco_standin_{{split}}.log",
    benchmark:
        f"{BENCHMARKS}/evaluate/coco_standin_{{split}}.tsv"
    wildcard_constraints:
        split="train|val",
    conda:
        ENV
    params:
        shapes=EVAL["shapes"],
        image_size=EVAL["coco"]["image_size"],
    script:
        "../workflow_scripts/coco_standin.py"


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
        section=lambda wildcards: EVAL_PLAN.job_section(
            EVALUATIONS[wildcards.evaluation]
        ),
    script:
        "../workflow_scripts/evaluate.py"
