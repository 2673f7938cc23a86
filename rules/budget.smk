# The compute budget of the default target under the running config (dpvip.budget): FLOPs per
# job from torch.utils.flop_counter, A100/H100 GPU-hours, the Slurm runtime check against
# profiles/slurm, the paper-shape smoke run's peak RSS (paper scale, when it has run here) and
# the papers' own run times beside ours. It plans the DAG with Snakemake itself (a dry run of
# the same Snakefile), so it needs no other job's output.
rule compute_budget:
    input:
        data=workflow_path(f"{config['paper_values']}/compute_budget.yaml"),
    output:
        table_files("compute_budget"),
        table_files("compute_budget_summary"),
        table_files("compute_budget_papers"),
    log:
        f"{LOGS}/tables/compute_budget.log",
    benchmark:
        f"{BENCHMARKS}/tables/compute_budget.tsv"
    localrule: True
    conda:
        ENV
    params:
        config=config,
        snakefile=os.path.join(DPVIP_DIR, "Snakefile"),  # dpvip's own, also as a module
        workdir=working_directory,
        profile=workflow_path("profiles/slurm"),
        smoke_config=(
            workflow_path("config/smoke.yaml") if config["scale"] == "paper" else None
        ),
    script:
        "../workflow_scripts/table_compute_budget.py"
