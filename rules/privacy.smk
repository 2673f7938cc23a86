# Privacy accounting: the claims audit of the three papers and ViP's epsilon curve.


rule privacy_audit:
    input:
        claims=workflow_path(config["privacy"]["claims"]),
    output:
        f"{RESULTS}/privacy/audit_{{paper}}.csv",
    log:
        f"{LOGS}/privacy/audit_{{paper}}.log",
    benchmark:
        f"{BENCHMARKS}/privacy/audit_{{paper}}.tsv"
    conda:
        ENV
    params:
        accountants=config["privacy"]["audit_accountants"],
    script:
        "../workflow_scripts/privacy_audit.py"


rule privacy_curve_vip_figure6:
    output:
        f"{RESULTS}/privacy/vip_figure6_curve.csv",
    log:
        f"{LOGS}/privacy/curve_vip_figure6.log",
    benchmark:
        f"{BENCHMARKS}/privacy/curve_vip_figure6.tsv"
    conda:
        ENV
    params:
        curve=config["figures"]["vip_figure6"],
    script:
        "../workflow_scripts/privacy_curve.py"
