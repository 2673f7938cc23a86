# ViP: DP MAE training on the private dataset, from (Syn)-ViP checkpoints; one job per run
# (the main runs and the ablations of dp_pretrain.ablations). A run resumes from its own
# results/dp_pretrain/<run>/work/state.pt and continues its privacy ledger.


wildcard_constraints:
    run="|".join(DP_RUNS),


rule dp_mae:
    input:
        unpack(dp_run_inputs),
    output:
        model=f"{DP_PRETRAIN}/{{run}}/model.pt",
        metrics=f"{DP_PRETRAIN}/{{run}}/metrics.jsonl",
        privacy=f"{DP_PRETRAIN}/{{run}}/privacy.json",
    log:
        f"{LOGS}/dp_pretrain/{{run}}.log",
    benchmark:
        f"{BENCHMARKS}/dp_pretrain/{{run}}.tsv"
    conda:
        ENV
    threads: DP["threads"]
    resources:
        **DP_LAUNCH,
        gpu=DP["gpus"],
    params:
        settings=lambda wildcards: DP_RUNS[wildcards.run].values,
        model=lambda wildcards: DP_RUNS[wildcards.run].model,
        processes=max(1, DP["gpus"]),  # per node
        nodes=DP["nodes"],
        run=lambda wildcards: dp_run(wildcards.run),
    script:
        "../workflow_scripts/dp_mae.py"
