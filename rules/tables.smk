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
