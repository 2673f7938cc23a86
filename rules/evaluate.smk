# ViP's downstream evaluations: one job per (task, backbone, dataset) that a ViP table or
# figure needs (EVALUATIONS, from dpvip.plan.vip_evaluations); each writes a small JSON result
# and resumes from its private work folder (<result>.work) when rerun.
#
# An evaluation may run as several processes per node (evaluate.<task>.processes, each with
# evaluate.gpus GPUs; DP fine-tuning, COCO and ADE20K read it) on several nodes
# (evaluate.<task>.nodes), launched as the DP runs are (dpvip.train.launch, evaluation_launch
# in common.smk): srun, one torchrun per node, a c10d rendezvous on the first.


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
        gpu=evaluation_gpus,
        nodes=evaluation_nodes,
        mpi=evaluation_mpi,
        tasks=evaluation_tasks,
        runtime=lambda wildcards: EVAL["runtime_minutes"][
            EVALUATIONS[wildcards.evaluation].task
        ],
    params:
        evaluation=lambda wildcards: EVALUATIONS[wildcards.evaluation],
        # only what this job reads, so a change elsewhere in `evaluate` does not rerun it
        section=lambda wildcards: EVAL_PLAN.job_section(
            EVALUATIONS[wildcards.evaluation]
        ),
        processes=evaluation_processes,  # per node
        nodes=evaluation_nodes,
        data_digest=evaluation_data_digest,
    script:
        "../workflow_scripts/evaluate.py"
