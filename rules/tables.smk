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
        f"{LOGS}/table_privacy_audit.log",
    benchmark:
        f"{BENCHMARKS}/table_privacy_audit.tsv"
    localrule: True
    conda:
        ENV
    script:
        "../workflow_scripts/table_privacy_audit.py"


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
        f"{LOGS}/table_synthetic_datasets.log",
    benchmark:
        f"{BENCHMARKS}/table_synthetic_datasets.tsv"
    localrule: True
    conda:
        ENV
    params:
        scale=config["scale"],
    script:
        "../workflow_scripts/table_synthetic_datasets.py"
