# Privacy accounting: the claims audit of the three papers and ViP's epsilon curve; the
# empirical audit: canaries through each mechanism's DP step, lower bounds on its epsilon.


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


rule privacy_empirical_audit:
    input:
        ledger=lambda wildcards: AUDIT_SOURCES[wildcards.mechanism],
    output:
        f"{RESULTS}/privacy/empirical/{{mechanism}}.json",
    log:
        f"{LOGS}/privacy/empirical_{{mechanism}}.log",
    benchmark:
        f"{BENCHMARKS}/privacy/empirical_{{mechanism}}.tsv"
    wildcard_constraints:
        mechanism="|".join(AUDIT_SOURCES) or "none",
    conda:
        ENV
    params:
        settings=EMPIRICAL,
    script:
        "../workflow_scripts/privacy_empirical_audit.py"


rule privacy_empirical_grid:
    output:
        f"{RESULTS}/privacy/empirical/grid.json",
    log:
        f"{LOGS}/privacy/empirical_grid.log",
    benchmark:
        f"{BENCHMARKS}/privacy/empirical_grid.tsv"
    conda:
        ENV
    params:
        settings=EMPIRICAL,
    script:
        "../workflow_scripts/privacy_empirical_grid.py"
