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
