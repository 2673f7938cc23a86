# DP transfer on frozen features: each feature set is cached once (one forward pass over a
# dataset), then one job per study trains every linear head its table or figure shows:
# Mehta et al.'s last-layer DP fine-tuning and DP-RandP's private linear probing.
from dpvip.transfer.plan import MEHTA_FIGURES, MEHTA_TABLES, PROBE_TABLES, STUDIES
from dpvip.transfer.plan import TransferPlan

TRANSFER = f"{RESULTS}/dp_transfer"
TRANSFER_CONFIG = config["dp_transfer"]
MEHTA_VALUES = workflow_path(f"{config['paper_values']}/mehta.csv")
try:
    TRANSFER_PLAN = TransferPlan(TRANSFER_CONFIG)
    FEATURE_SETS = TRANSFER_PLAN.feature_sets()
except DpvipInputError as err:
    raise WorkflowError(f"invalid configuration: {err}") from None
# The studies some configured table or figure shows (a config without Mehta has none).
TRANSFER_STUDIES = [study for study in STUDIES if TRANSFER_PLAN.runs(study)]
MEHTA_OUTPUTS = [s.removeprefix("mehta_") for s in TRANSFER_STUDIES if s.startswith("mehta_")]
PROBE_OUTPUTS = [
    table
    for table, task in PROBE_TABLES.items()
    if f"dprandp_probe_{task}" in TRANSFER_STUDIES
]


def transfer_checkpoint(backbone):
    """The checkpoint a backbone's features come from: a run of this workflow, or a file."""
    spec = TRANSFER_PLAN.backbones[backbone]
    source, run = spec["from"], spec.get("run")
    known = {
        "syn_vip": SYN_VIP["models"],
        "dp_pretrain": list(DP_RUNS),
        "dprandp": ["main", *RANDP_PHASE1],
    }
    if source == "file":
        return spec["path"]
    if run not in known[source]:
        raise WorkflowError(
            f"invalid configuration: dp_transfer.backbones.{backbone}.run '{run}' is not a "
            f"{source} run of this workflow (known: {', '.join(known[source])})"
        )
    if source == "syn_vip":
        return f"{syn_vip_run(run)}/model.pt"
    if source == "dp_pretrain":
        return f"{dp_run(run)}/model.pt"
    name = RANDP_PLAN.main_init.name if run == "main" else run
    return f"{DPRANDP}/{RANDP_PHASE1[name].path}"


for _backbone in TRANSFER_PLAN.backbones:  # a bad run name stops before any job
    transfer_checkpoint(_backbone)


def study_caches(study):
    return {
        f.path: f"{TRANSFER}/features/{f.path}"
        for f in TRANSFER_PLAN.study_features(study)
    }


wildcard_constraints:
    feature_set="|".join(re.escape(path) for path in FEATURE_SETS) or "^$",
    study="|".join(TRANSFER_STUDIES) or "^$",


rule transfer_features:
    input:
        checkpoint=lambda wildcards: transfer_checkpoint(
            FEATURE_SETS[wildcards.feature_set].backbone
        ),
    output:
        directory(f"{TRANSFER}/features/{{feature_set}}"),
    log:
        f"{LOGS}/dp_transfer/features/{{feature_set}}.log",
    benchmark:
        f"{BENCHMARKS}/dp_transfer/features/{{feature_set}}.tsv"
    conda:
        ENV
    threads: TRANSFER_CONFIG["threads"]
    resources:
        gpu=TRANSFER_CONFIG["gpus"],
        runtime=TRANSFER_CONFIG["runtime_minutes"]["features"],
    params:
        feature_set=lambda wildcards: FEATURE_SETS[wildcards.feature_set],
        kind=lambda wildcards: TRANSFER_PLAN.kind(
            FEATURE_SETS[wildcards.feature_set].backbone
        ),
        dataset=lambda wildcards: TRANSFER_CONFIG["datasets"][
            FEATURE_SETS[wildcards.feature_set].dataset
        ],
        section=TRANSFER_CONFIG["features"],
    script:
        "../workflow_scripts/transfer_features.py"


rule transfer_study:
    input:
        lambda wildcards: list(study_caches(wildcards.study).values()),
    output:
        f"{TRANSFER}/{{study}}.json",
    log:
        f"{LOGS}/dp_transfer/{{study}}.log",
    benchmark:
        f"{BENCHMARKS}/dp_transfer/{{study}}.tsv"
    conda:
        ENV
    threads: TRANSFER_CONFIG["threads"]
    resources:
        gpu=TRANSFER_CONFIG["gpus"],
        runtime=TRANSFER_CONFIG["runtime_minutes"]["study"],
    params:
        runs=lambda wildcards: TRANSFER_PLAN.runs(wildcards.study),
        caches=lambda wildcards: study_caches(wildcards.study),
    script:
        "../workflow_scripts/transfer_study.py"


rule table_mehta:
    input:
        paper_values=MEHTA_VALUES,
        results=f"{TRANSFER}/mehta_{{table}}.json",
    output:
        report(
            table_files("mehta_{table}"),
            caption="../report/mehta_tables.rst",
            category="Tables",
            subcategory="Mehta et al.",
        ),
    log:
        f"{LOGS}/table_mehta_{{table}}.log",
    benchmark:
        f"{BENCHMARKS}/table_mehta_{{table}}.tsv"
    wildcard_constraints:
        table="|".join(MEHTA_TABLES),
    localrule: True
    conda:
        ENV
    params:
        section=TRANSFER_CONFIG,
        scale=config["scale"],
    script:
        "../workflow_scripts/table_mehta.py"


rule figure_mehta:
    input:
        results=f"{TRANSFER}/mehta_{{figure}}.json",
    output:
        report(
            figure_files("mehta_{figure}"),
            caption="../report/mehta_figures.rst",
            category="Figures",
            subcategory="Mehta et al.",
        ),
    log:
        f"{LOGS}/figure_mehta_{{figure}}.log",
    benchmark:
        f"{BENCHMARKS}/figure_mehta_{{figure}}.tsv"
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


rule table_dprandp_probe:
    input:
        paper_values=DPRANDP_VALUES,
        results=lambda wildcards: f"{TRANSFER}/dprandp_probe_{PROBE_TABLES[wildcards.table]}.json",
    output:
        report(
            table_files("dprandp_{table}"),
            caption="../report/dprandp_probe.rst",
            category="Tables",
            subcategory="DP-RandP",
        ),
    log:
        f"{LOGS}/table_dprandp_{{table}}.log",
    benchmark:
        f"{BENCHMARKS}/table_dprandp_{{table}}.tsv"
    wildcard_constraints:
        table="|".join(PROBE_TABLES),
    localrule: True
    conda:
        ENV
    params:
        section=TRANSFER_CONFIG,
        scale=config["scale"],
    script:
        "../workflow_scripts/table_dprandp_probe.py"
