# Tables: cheap, local rules that only read small result files.


rule table_privacy_audit:
    input:
        expand(
            f"{RESULTS}/privacy/audit_{{paper}}.csv",
            paper=config["privacy"]["audit_papers"],
        ),
    output:
        report(
            table_files("privacy_audit"),
            caption="../report/privacy_audit.rst",
            category="Tables",
            subcategory="Privacy",
        ),
    log:
        f"{LOGS}/tables/privacy_audit.log",
    benchmark:
        f"{BENCHMARKS}/tables/privacy_audit.tsv"
    localrule: True
    conda:
        ENV
    script:
        "../workflow_scripts/table_privacy_audit.py"


rule table_privacy_empirical:
    input:
        [f"{RESULTS}/privacy/empirical/{m}.json" for m in AUDIT_SOURCES],
    output:
        report(
            table_files("privacy_empirical"),
            caption="../report/privacy_empirical.rst",
            category="Tables",
            subcategory="Privacy",
        ),
    log:
        f"{LOGS}/tables/privacy_empirical.log",
    benchmark:
        f"{BENCHMARKS}/tables/privacy_empirical.tsv"
    localrule: True
    conda:
        ENV
    script:
        "../workflow_scripts/table_privacy_empirical.py"


rule table_synthetic_datasets:
    input:
        indexes=SYNTHETIC_INDEXES,
        benchmarks=SYNTHETIC_SHARD_BENCHMARKS,
    output:
        report(
            table_files("synthetic_datasets"),
            caption="../report/synthetic_datasets.rst",
            category="Tables",
            subcategory="Synthetic data",
        ),
    log:
        f"{LOGS}/tables/synthetic_datasets.log",
    benchmark:
        f"{BENCHMARKS}/tables/synthetic_datasets.tsv"
    localrule: True
    conda:
        ENV
    params:
        scale=config["scale"],
    script:
        "../workflow_scripts/table_synthetic_datasets.py"


rule table_vip_table3:
    input:
        workflow_path(f"{config['paper_values']}/vip.csv"),
    output:
        report(
            table_files("vip_table3"),
            caption="../report/vip_table3.rst",
            category="Tables",
            subcategory="ViP",
        ),
    log:
        f"{LOGS}/tables/vip_table3.log",
    benchmark:
        f"{BENCHMARKS}/tables/vip_table3.tsv"
    localrule: True
    conda:
        ENV
    params:
        models=SYN_VIP["models"],
        image_size=SYN_VIP["image_size"],
        patch_size=SYN_VIP["patch_size"],
    script:
        "../workflow_scripts/table_vip_table3.py"


rule table_vip_dp_runs:
    input:
        paper_values=workflow_path(f"{config['paper_values']}/vip.csv"),
        privacy=dp_ledgers(DP_RUNS),
        metrics=[f"{dp_run(name)}/metrics.jsonl" for name in DP_RUNS],
    output:
        report(
            table_files("vip_dp_runs"),
            caption="../report/vip_dp_runs.rst",
            category="Tables",
            subcategory="ViP",
        ),
    log:
        f"{LOGS}/tables/vip_dp_runs.log",
    benchmark:
        f"{BENCHMARKS}/tables/vip_dp_runs.tsv"
    localrule: True
    conda:
        ENV
    script:
        "../workflow_scripts/table_vip_dp_runs.py"


rule table_vip_result:
    input:
        unpack(vip_table_inputs),
    output:
        report(
            table_files("{table}"),
            caption="../report/vip_results.rst",
            category="Tables",
            subcategory="ViP",
        ),
    log:
        f"{LOGS}/tables/{{table}}.log",
    benchmark:
        f"{BENCHMARKS}/tables/{{table}}.tsv"
    wildcard_constraints:
        table="|".join(VIP_TABLES),
    localrule: True
    conda:
        ENV
    params:
        columns=lambda wildcards: VIP_COLUMNS[wildcards.table],
        backbones=VIP_BACKBONES,
        shapes=mae_shapes(),
        # Table 1's '# pre-train samples' of each (Syn)-ViP: the synthetic images it saw
        synthetic_images={
            f"syn_vip_{m}": SYNTHETIC_SPECS[SYN_VIP["dataset"]].images
            for m in SYN_VIP["models"]
        },
        scale=config["scale"],
    script:
        "../workflow_scripts/table_vip_result.py"


rule table_vip_claims:
    input:
        unpack(vip_claims_inputs),
    output:
        report(
            table_files("vip_claims"),
            caption="../report/claims.rst",
            category="Claims",
        ),
    log:
        f"{LOGS}/tables/vip_claims.log",
    benchmark:
        f"{BENCHMARKS}/tables/vip_claims.tsv"
    localrule: True
    conda:
        ENV
    params:
        plan=EVAL_PLAN,
        scale=config["scale"],
    script:
        "../workflow_scripts/table_vip_claims.py"


rule table_mehta_hyperparameters:
    input:
        paper_values=MEHTA_VALUES,
        paper_settings=MEHTA_SETTINGS,
        studies=lambda wildcards: [
            f"{TRANSFER}/mehta_{study}.json"
            for study in [MEHTA_HYPERPARAMETER_TABLES[wildcards.table]]
            if study
        ],
    output:
        report(
            table_files("mehta_{table}"),
            caption="../report/mehta_hyperparameters.rst",
            category="Tables",
            subcategory="Mehta et al.",
        ),
    log:
        f"{LOGS}/tables/mehta_{{table}}.log",
    benchmark:
        f"{BENCHMARKS}/tables/mehta_{{table}}.tsv"
    wildcard_constraints:
        table="|".join(MEHTA_HYPERPARAMETER_TABLES),
    localrule: True
    conda:
        ENV
    params:
        section=TRANSFER_CONFIG,
        stages={"syn_vip": SYN_VIP, "dp_pretrain": DP, "dprandp": RANDP["phase1"]},
        scale=config["scale"],
    script:
        "../workflow_scripts/table_mehta_hyperparameters.py"


rule table_mehta_throughput:
    input:
        paper_values=MEHTA_VALUES,
        results=f"{TRANSFER}/mehta_{MEHTA_THROUGHPUT_STUDY}.json",
    output:
        report(
            table_files("mehta_table10"),
            caption="../report/mehta_throughput.rst",
            category="Tables",
            subcategory="Mehta et al.",
        ),
    log:
        f"{LOGS}/tables/mehta_table10.log",
    benchmark:
        f"{BENCHMARKS}/tables/mehta_table10.tsv"
    localrule: True
    conda:
        ENV
    params:
        section=TRANSFER_CONFIG,
        scale=config["scale"],
    script:
        "../workflow_scripts/table_mehta_throughput.py"


rule table_mehta_claims:
    input:
        studies=mehta_claims_studies(),
        catalogue=claims_catalogue("mehta"),
    output:
        report(
            table_files("mehta_claims"),
            caption="../report/claims.rst",
            category="Claims",
        ),
    log:
        f"{LOGS}/tables/mehta_claims.log",
    benchmark:
        f"{BENCHMARKS}/tables/mehta_claims.tsv"
    localrule: True
    conda:
        ENV
    params:
        scale=config["scale"],
    script:
        "../workflow_scripts/table_mehta_claims.py"


rule table_claims:
    input:
        [f"{TABLES}/{name}.csv" for name in CLAIM_TABLES.values()],
    output:
        report(
            table_files("claims"),
            caption="../report/claims_overview.rst",
            category="Claims",
        ),
    log:
        f"{LOGS}/tables/claims.log",
    benchmark:
        f"{BENCHMARKS}/tables/claims.tsv"
    localrule: True
    conda:
        ENV
    params:
        papers=list(CLAIM_TABLES),
        scale=config["scale"],
    script:
        "../workflow_scripts/table_claims.py"


rule table_coverage:
    output:
        report(
            table_files("coverage"),
            caption="../report/coverage.rst",
            category="Claims",
        ),
    log:
        f"{LOGS}/tables/coverage.log",
    benchmark:
        f"{BENCHMARKS}/tables/coverage.tsv"
    localrule: True
    conda:
        ENV
    script:
        "../workflow_scripts/table_coverage.py"


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


rule table_dprandp_cost:
    input:
        unpack(dprandp_cost_inputs),
    output:
        report(
            table_files("dprandp_{table}"),
            caption="../report/dprandp_cost.rst",
            category="Tables",
            subcategory="DP-RandP",
        ),
    log:
        f"{LOGS}/tables/dprandp_{{table}}.log",
    benchmark:
        f"{BENCHMARKS}/tables/dprandp_{{table}}.tsv"
    wildcard_constraints:
        table="|".join(DPRANDP_COST_TABLES),
    localrule: True
    conda:
        ENV
    params:
        plan=RANDP_PLAN,
        scale=config["scale"],
        phase1=lambda wildcards: dprandp_cost_phase1(wildcards.table),
        features=lambda wildcards: dprandp_cost_features(wildcards.table),
        runs=lambda wildcards: dprandp_results(wildcards.table)[0],
    script:
        "../workflow_scripts/table_dprandp_cost.py"


rule table_dprandp_claims:
    input:
        results=dprandp_results("claims")[1],
        studies=dprandp_claims_studies(),
        catalogue=claims_catalogue("dprandp"),
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
