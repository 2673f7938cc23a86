# DP transfer on frozen features: each feature set is cached once (one forward pass over a
# dataset), then one job per study trains every linear head its table or figure shows:
# Mehta et al.'s last-layer DP fine-tuning and DP-RandP's private linear probing.
wildcard_constraints:
    feature_set="|".join(re.escape(path) for path in FEATURE_SETS) or "^$",
    study="|".join(TRANSFER_STUDIES) or "^$",


rule transfer_features:
    input:
        checkpoint=lambda wildcards: transfer_checkpoint(
            FEATURE_SETS[wildcards.feature_set].backbone
        ),
    output:
        directory(f"{TRANSFER}/features/{{feature_set}}"),
    log:
        f"{LOGS}/dp_transfer/features/{{feature_set}}.log",
    benchmark:
        f"{BENCHMARKS}/dp_transfer/features/{{feature_set}}.tsv"
    conda:
        ENV
    threads: TRANSFER_CONFIG["threads"]
    resources:
        gpu=TRANSFER_CONFIG["gpus"],
        runtime=TRANSFER_CONFIG["runtime_minutes"]["features"],
    params:
        feature_set=lambda wildcards: FEATURE_SETS[wildcards.feature_set],
        kind=lambda wildcards: TRANSFER_PLAN.kind(
            FEATURE_SETS[wildcards.feature_set].backbone
        ),
        dataset=lambda wildcards: TRANSFER_CONFIG["datasets"][
            FEATURE_SETS[wildcards.feature_set].dataset
        ],
        section=TRANSFER_CONFIG["features"],
        # the user's images: a change inside the folder rebuilds the cache, not only a new path
        data_digest=lambda wildcards: spec_digests(
            TRANSFER_CONFIG["datasets"][FEATURE_SETS[wildcards.feature_set].dataset]
        ),
    script:
        "../workflow_scripts/transfer_features.py"


rule transfer_study:
    input:
        lambda wildcards: list(study_caches(wildcards.study).values()),
    output:
        f"{TRANSFER}/{{study}}.json",
    log:
        f"{LOGS}/dp_transfer/{{study}}.log",
    benchmark:
        f"{BENCHMARKS}/dp_transfer/{{study}}.tsv"
    conda:
        ENV
    threads: TRANSFER_CONFIG["threads"]
    resources:
        gpu=TRANSFER_CONFIG["gpus"],
        runtime=TRANSFER_CONFIG["runtime_minutes"]["study"],
    params:
        # a digest, not the runs (their repr made Snakemake's params-change line ~55 KB)
        runs_digest=lambda wildcards: TRANSFER_PLAN.runs_digest(wildcards.study),
        caches=lambda wildcards: study_caches(wildcards.study),
        selection=lambda wildcards: TRANSFER_PLAN.selection_record(wildcards.study),
    script:
        "../workflow_scripts/transfer_study.py"
