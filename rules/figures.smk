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
        f"{LOGS}/figures/vip_figure6.log",
    benchmark:
        f"{BENCHMARKS}/figures/vip_figure6.tsv"
    localrule: True
    conda:
        ENV
    script:
        "../workflow_scripts/figure_vip_figure6.py"


rule figure_privacy_empirical:
    input:
        f"{RESULTS}/privacy/empirical/grid.json",
    output:
        report(
            figure_files("privacy_empirical"),
            caption="../report/privacy_empirical.rst",
            category="Figures",
            subcategory="Privacy",
        ),
    log:
        f"{LOGS}/figures/privacy_empirical.log",
    benchmark:
        f"{BENCHMARKS}/figures/privacy_empirical.tsv"
    localrule: True
    conda:
        ENV
    script:
        "../workflow_scripts/figure_privacy_empirical.py"


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
        f"{LOGS}/figures/synthetic_samples.log",
    benchmark:
        f"{BENCHMARKS}/figures/synthetic_samples.tsv"
    localrule: True
    conda:
        ENV
    params:
        datasets=list(SYNTHETIC_SPECS),
        per_dataset=config["figures"]["synthetic_samples"]["per_dataset"],
    script:
        "../workflow_scripts/figure_synthetic_samples.py"


rule figure_syn_vip_loss:
    input:
        expand(f"{PRETRAIN}/syn_vip_{{model}}/metrics.jsonl", model=SYN_VIP["models"]),
    output:
        report(
            figure_files("syn_vip_loss"),
            caption="../report/syn_vip_loss.rst",
            category="Figures",
            subcategory="Pre-training",
        ),
    log:
        f"{LOGS}/figures/syn_vip_loss.log",
    benchmark:
        f"{BENCHMARKS}/figures/syn_vip_loss.tsv"
    localrule: True
    conda:
        ENV
    params:
        dataset=SYN_VIP["dataset"],
    script:
        "../workflow_scripts/figure_syn_vip_loss.py"


rule figure_syn_vip_reconstructions:
    input:
        expand(
            f"{PRETRAIN}/syn_vip_{{model}}/reconstructions.npz",
            model=SYN_VIP["models"],
        ),
    output:
        report(
            figure_files("syn_vip_reconstructions"),
            caption="../report/syn_vip_reconstructions.rst",
            category="Figures",
            subcategory="Pre-training",
        ),
    log:
        f"{LOGS}/figures/syn_vip_reconstructions.log",
    benchmark:
        f"{BENCHMARKS}/figures/syn_vip_reconstructions.tsv"
    localrule: True
    conda:
        ENV
    script:
        "../workflow_scripts/figure_syn_vip_reconstructions.py"


rule figure_vip_dp_loss:
    input:
        dp_figure_inputs,
    output:
        report(
            figure_files("{figure}"),
            caption="../report/vip_dp_loss.rst",
            category="Figures",
            subcategory="DP pre-training",
        ),
    log:
        f"{LOGS}/figures/{{figure}}.log",
    benchmark:
        f"{BENCHMARKS}/figures/{{figure}}.tsv"
    wildcard_constraints:
        figure="|".join(DP_FIGURES),
    localrule: True
    conda:
        ENV
    params:
        runs=lambda wildcards: DP_FIGURES[wildcards.figure],
        # the legend says what the curves ran on: the scale and the private data's source
        data=f"{config['scale']} scale; private set {DP['dataset']} "
        f"(source: {config['data'][DP['dataset']].get('source', 'configured')})",
    script:
        "../workflow_scripts/figure_vip_dp_loss.py"


rule figure_vip_evaluations:
    input:
        paper_values=VIP_VALUES,
        results=lambda wildcards: evaluation_files(wildcards.figure),
        # the evaluated DP-MAE runs' ledgers: a figure of seeded runs says NOT PRIVATE
        ledgers=lambda wildcards: dp_ledgers(
            sorted({e.backbone for e in EVAL_NEEDS[wildcards.figure]})
        ),
    output:
        report(
            figure_files("{figure}"),
            caption="../report/vip_eval_figures.rst",
            category="Figures",
            subcategory="ViP evaluations",
        ),
    log:
        f"{LOGS}/figures/{{figure}}.log",
    benchmark:
        f"{BENCHMARKS}/figures/{{figure}}.tsv"
    wildcard_constraints:
        figure="vip_figure1|vip_figure5",
    localrule: True
    conda:
        ENV
    params:
        plan=EVAL_PLAN,
        shapes=mae_shapes(),
        scale=config["scale"],
    script:
        "../workflow_scripts/figure_vip_evaluations.py"


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


rule figure_mehta:
    input:
        paper_values=MEHTA_VALUES,
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
