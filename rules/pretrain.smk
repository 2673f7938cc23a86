# (Syn)-ViP: non-private MAE pre-training on synthetic images, one run per model size (and
# the shorter pre-trainings of dp_pretrain.ablations.synthetic_epochs: syn_vip_<model>_e<epochs>).
# A run resumes from its own results/pretrain/syn_vip_<model>/work/state.pt, so a job that
# was killed (time limit, preemption, crash) continues where it stopped when rerun.


wildcard_constraints:
    model="|".join([*SYN_VIP["models"], *SYN_VIP_VARIANTS]),


rule syn_vip:
    input:
        index=f"{SYNTHETIC}/{SYN_VIP['dataset']}/index.json",
        shards=[ancient(path) for path in SYNTHETIC_SHARDS[SYN_VIP["dataset"]]],
    output:
        model=f"{PRETRAIN}/syn_vip_{{model}}/model.pt",
        metrics=f"{PRETRAIN}/syn_vip_{{model}}/metrics.jsonl",
    log:
        f"{LOGS}/pretrain/syn_vip_{{model}}.log",
    benchmark:
        f"{BENCHMARKS}/pretrain/syn_vip_{{model}}.tsv"
    conda:
        ENV
    threads: SYN_VIP["threads"]
    resources:
        **SYN_VIP_LAUNCH,
        gpu=SYN_VIP["gpus"],
    params:
        settings=lambda wildcards: syn_vip_values(wildcards.model),
        size=lambda wildcards: syn_vip_model(wildcards.model),
        processes=max(1, SYN_VIP["gpus"]),  # per node
        nodes=SYN_VIP["nodes"],
        run=lambda wildcards: syn_vip_run(wildcards.model),
    script:
        "../workflow_scripts/syn_vip.py"


rule syn_vip_reconstructions:
    input:
        f"{PRETRAIN}/syn_vip_{{model}}/model.pt",
    output:
        f"{PRETRAIN}/syn_vip_{{model}}/reconstructions.npz",
    log:
        f"{LOGS}/pretrain/syn_vip_{{model}}_reconstructions.log",
    benchmark:
        f"{BENCHMARKS}/pretrain/syn_vip_{{model}}_reconstructions.tsv"
    conda:
        ENV
    params:
        dataset=SYN_VIP["dataset"],
        spec=config["synthetic"]["datasets"][SYN_VIP["dataset"]],
        images=SYN_VIP["reconstructions"],
    script:
        "../workflow_scripts/syn_vip_reconstructions.py"
