# Figures: cheap, local rules that only read small result files.


rule figure_vip_figure6:
    input:
        f"{RESULTS}/privacy/vip_figure6_curve.csv",
    output:
        report(figure_files("vip_figure6"), category="Figures", subcategory="Privacy"),
    log:
        f"{LOGS}/figure_vip_figure6.log",
    localrule: True
    conda:
        ENV
    script:
        "../workflow_scripts/figure_vip_figure6.py"
