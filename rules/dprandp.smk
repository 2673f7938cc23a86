# DP-RandP: Phase I (contrastive pre-training on synthetic images), then Phases II and III
# (DP-SGD on the head, then on the whole network) per task, epsilon, seed and variant.
# Both resume from their own state when a killed job is rerun.


wildcard_constraints:
    phase1="|".join(RANDP_PHASE1) or "^$",
    randp_run="|".join(re.escape(path) for path in RANDP_RUNS) or "^$",


rule dprandp_phase1:
    input:
        unpack(phase1_inputs),
    output:
        model=f"{DPRANDP}/phase1/{{phase1}}/model.pt",
        metrics=f"{DPRANDP}/phase1/{{phase1}}/metrics.jsonl",
    log:
        f"{LOGS}/dprandp/phase1_{{phase1}}.log",
    benchmark:
        f"{BENCHMARKS}/dprandp/phase1_{{phase1}}.tsv"
    conda:
        ENV
    threads: RANDP["threads"]
    resources:
        gpu=RANDP["gpus"],
        runtime=RANDP["runtime_minutes"]["phase1"],
    params:
        run=lambda wildcards: RANDP_PHASE1[wildcards.phase1],
        section=lambda wildcards: phase1_section(wildcards.phase1),
        data=lambda wildcards: config["synthetic"]["datasets"][
            RANDP_PHASE1[wildcards.phase1].dataset
        ],
    script:
        "../workflow_scripts/dprandp_phase1.py"


rule dprandp_private:
    input:
        unpack(private_run_inputs),
    output:
        f"{DPRANDP}/{{randp_run}}.json",
    log:
        f"{LOGS}/dprandp/{{randp_run}}.log",
    benchmark:
        f"{BENCHMARKS}/dprandp/{{randp_run}}.tsv"
    conda:
        ENV
    threads: RANDP["threads"]
    resources:
        gpu=RANDP["gpus"],
        runtime=RANDP["runtime_minutes"]["private"],
    params:
        run=lambda wildcards: RANDP_RUNS[wildcards.randp_run],
        settings=lambda wildcards: RANDP_SETTINGS[wildcards.randp_run],
        data=lambda wildcards: RANDP["private"]["tasks"][
            RANDP_RUNS[wildcards.randp_run].task
        ]["data"],
    script:
        "../workflow_scripts/dprandp_private.py"


rule table_dprandp:
    input:
        paper_values=DPRANDP_VALUES,
        results=lambda wildcards: dprandp_results(wildcards.table)[1],
    output:
        report(
            table_files("dprandp_{table}"),
            caption="../report/dprandp_results.rst",
            category="Tables",
            subcategory="DP-RandP",
        ),
    log:
        f"{LOGS}/tables/dprandp_{{table}}.log",
    benchmark:
        f"{BENCHMARKS}/tables/dprandp_{{table}}.tsv"
    wildcard_constraints:
        table="|".join(DPRANDP_TABLES),
    localrule: True
    conda:
        ENV
    params:
        plan=RANDP_PLAN,
        scale=config["scale"],
        runs=lambda wildcards: dprandp_results(wildcards.table)[0],
    script:
        "../workflow_scripts/table_dprandp.py"


rule table_dprandp_claims:
    input:
        results=dprandp_results("claims")[1],
    output:
        report(
            table_files("dprandp_claims"),
            caption="../report/dprandp_claims.rst",
            category="Tables",
            subcategory="DP-RandP",
        ),
    log:
        f"{LOGS}/tables/dprandp_claims.log",
    benchmark:
        f"{BENCHMARKS}/tables/dprandp_claims.tsv"
    localrule: True
    conda:
        ENV
    params:
        plan=RANDP_PLAN,
        scale=config["scale"],
        runs=dprandp_results("claims")[0],
    script:
        "../workflow_scripts/table_dprandp_claims.py"


rule figure_dprandp:
    input:
        paper_values=DPRANDP_VALUES,
        results=lambda wildcards: dprandp_results(wildcards.figure)[1],
    output:
        report(
            figure_files("dprandp_{figure}"),
            caption="../report/dprandp_figures.rst",
            category="Figures",
            subcategory="DP-RandP",
        ),
    log:
        f"{LOGS}/figures/dprandp_{{figure}}.log",
    benchmark:
        f"{BENCHMARKS}/figures/dprandp_{{figure}}.tsv"
    wildcard_constraints:
        figure="|".join(DPRANDP_FIGURES),
    localrule: True
    conda:
        ENV
    params:
        plan=RANDP_PLAN,
        scale=config["scale"],
        runs=lambda wildcards: dprandp_results(wildcards.figure)[0],
    script:
        "../workflow_scripts/figure_dprandp.py"
