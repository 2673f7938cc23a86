# DP-RandP: Phase I (contrastive pre-training on synthetic images), then Phases II and III
# (DP-SGD on the head, then on the whole network) per task, epsilon, seed and variant.
# Both resume from their own state when a killed job is rerun.


wildcard_constraints:
    phase1="|".join(RANDP_PHASE1) or "^$",
    randp_run="|".join(re.escape(path) for path in RANDP_RUNS) or "^$",


rule dprandp_phase1:
    input:
        unpack(phase1_inputs),
    output:
        model=f"{DPRANDP}/phase1/{{phase1}}/model.pt",
        metrics=f"{DPRANDP}/phase1/{{phase1}}/metrics.jsonl",
    log:
        f"{LOGS}/dprandp/phase1_{{phase1}}.log",
    benchmark:
        f"{BENCHMARKS}/dprandp/phase1_{{phase1}}.tsv"
    conda:
        ENV
    threads: RANDP["threads"]
    resources:
        gpu=RANDP["gpus"],
        runtime=RANDP["runtime_minutes"]["phase1"],
    params:
        run=lambda wildcards: RANDP_PHASE1[wildcards.phase1],
        section=lambda wildcards: phase1_section(wildcards.phase1),
        data=lambda wildcards: config["synthetic"]["datasets"][
            RANDP_PHASE1[wildcards.phase1].dataset
        ],
    script:
        "../workflow_scripts/dprandp_phase1.py"


rule dprandp_private:
    input:
        unpack(private_run_inputs),
    output:
        f"{DPRANDP}/{{randp_run}}.json",
    log:
        f"{LOGS}/dprandp/{{randp_run}}.log",
    benchmark:
        f"{BENCHMARKS}/dprandp/{{randp_run}}.tsv"
    conda:
        ENV
    threads: RANDP["threads"]
    resources:
        gpu=RANDP["gpus"],
        runtime=RANDP["runtime_minutes"]["private"],
    params:
        run=lambda wildcards: RANDP_RUNS[wildcards.randp_run],
        settings=lambda wildcards: RANDP_SETTINGS[wildcards.randp_run],
        data=lambda wildcards: RANDP["private"]["tasks"][
            RANDP_RUNS[wildcards.randp_run].task
        ]["data"],
        data_digest=lambda wildcards: spec_digests(
            RANDP["private"]["tasks"][RANDP_RUNS[wildcards.randp_run].task]["data"]
        ),
    script:
        "../workflow_scripts/dprandp_private.py"
