# Synthetic images from random processes: one job per shard, then an index per dataset.
# Every image is a pure function of (dataset config, index), so shards can run anywhere,
# in any order, and a lost shard is regenerated alone with the same bytes.


wildcard_constraints:
    dataset="|".join(SYNTHETIC_SPECS),
    shard=r"shard-\d{6}",


rule synthetic_shard:
    output:
        f"{SYNTHETIC}/{{dataset}}/{{shard}}.tar",
    log:
        f"{LOGS}/synthetic/{{dataset}}/{{shard}}.log",
    benchmark:
        f"{BENCHMARKS}/synthetic/{{dataset}}/{{shard}}.tsv"
    conda:
        ENV
    threads: config["synthetic"]["threads"]
    params:
        spec=lambda wildcards: config["synthetic"]["datasets"][wildcards.dataset],
        data_digest=lambda wildcards: spec_digests(
            config["synthetic"]["datasets"][wildcards.dataset]
        ),
    script:
        "../workflow_scripts/synthetic_shard.py"


rule synthetic_index:
    input:
        synthetic_shards,
    output:
        f"{SYNTHETIC}/{{dataset}}/index.json",
    log:
        f"{LOGS}/synthetic/{{dataset}}/index.log",
    benchmark:
        f"{BENCHMARKS}/synthetic/{{dataset}}/index.tsv"
    conda:
        ENV
    params:
        spec=lambda wildcards: config["synthetic"]["datasets"][wildcards.dataset],
    script:
        "../workflow_scripts/synthetic_index.py"
