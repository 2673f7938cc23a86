# Figures: cheap, local rules that only read small result files.


rule figure_vip_figure6:
    input:
        f"{RESULTS}/privacy/vip_figure6_curve.csv",
    output:
        report(
            figure_files("vip_figure6"),
            caption="../report/vip_figure6.rst",
            category="Figures",
            subcategory="Privacy",
        ),
    log:
        f"{LOGS}/figure_vip_figure6.log",
    benchmark:
        f"{BENCHMARKS}/figure_vip_figure6.tsv"
    localrule: True
    conda:
        ENV
    script:
        "../workflow_scripts/figure_vip_figure6.py"


rule figure_synthetic_samples:
    input:
        [ancient(shards[0]) for shards in SYNTHETIC_SHARDS.values()],
    output:
        report(
            figure_files("synthetic_samples"),
            caption="../report/synthetic_samples.rst",
            category="Figures",
            subcategory="Synthetic data",
        ),
    log:
        f"{LOGS}/figure_synthetic_samples.log",
    benchmark:
        f"{BENCHMARKS}/figure_synthetic_samples.tsv"
    localrule: True
    conda:
        ENV
    params:
        datasets=list(SYNTHETIC_SPECS),
        per_dataset=config["figures"]["synthetic_samples"]["per_dataset"],
    script:
        "../workflow_scripts/figure_synthetic_samples.py"
