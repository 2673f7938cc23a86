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
        runs=lambda wildcards: TRANSFER_PLAN.runs(wildcards.study),
        caches=lambda wildcards: study_caches(wildcards.study),
    script:
        "../workflow_scripts/transfer_study.py"


rule table_mehta:
    input:
        paper_values=MEHTA_VALUES,
        results=f"{TRANSFER}/mehta_{{table}}.json",
    output:
        report(
            table_files("mehta_{table}"),
            caption="../report/mehta_tables.rst",
            category="Tables",
            subcategory="Mehta et al.",
        ),
    log:
        f"{LOGS}/tables/mehta_{{table}}.log",
    benchmark:
        f"{BENCHMARKS}/tables/mehta_{{table}}.tsv"
    wildcard_constraints:
        table="|".join(MEHTA_TABLES),
    localrule: True
    conda:
        ENV
    params:
        paper="mehta",
        section=TRANSFER_CONFIG,
        scale=config["scale"],
    script:
        "../workflow_scripts/table_transfer.py"


rule figure_mehta:
    input:
        results=f"{TRANSFER}/mehta_{{figure}}.json",
    output:
        report(
            figure_files("mehta_{figure}"),
            caption="../report/mehta_figures.rst",
            category="Figures",
            subcategory="Mehta et al.",
        ),
    log:
        f"{LOGS}/figures/mehta_{{figure}}.log",
    benchmark:
        f"{BENCHMARKS}/figures/mehta_{{figure}}.tsv"
    wildcard_constraints:
        figure="|".join(MEHTA_FIGURES),
    localrule: True
    conda:
        ENV
    params:
        section=TRANSFER_CONFIG,
        scale=config["scale"],
    script:
        "../workflow_scripts/figure_mehta.py"


rule table_dprandp_probe:
    input:
        paper_values=DPRANDP_VALUES,
        results=lambda wildcards: f"{TRANSFER}/dprandp_probe_{PROBE_TABLES[wildcards.table]}.json",
    output:
        report(
            table_files("dprandp_{table}"),
            caption="../report/dprandp_probe.rst",
            category="Tables",
            subcategory="DP-RandP",
        ),
    log:
        f"{LOGS}/tables/dprandp_{{table}}.log",
    benchmark:
        f"{BENCHMARKS}/tables/dprandp_{{table}}.tsv"
    wildcard_constraints:
        table="|".join(PROBE_TABLES),
    localrule: True
    conda:
        ENV
    params:
        paper="dprandp",
        section=TRANSFER_CONFIG,
        scale=config["scale"],
    script:
        "../workflow_scripts/table_transfer.py"
