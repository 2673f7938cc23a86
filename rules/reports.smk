# What the published tables read beyond their own runs: ViP's claims, DP-RandP's cost
# tables, Mehta et al.'s appendix tables and claims, the claims overview, the privacy
# statement's sources and the empirical audit's mechanisms (after common.smk's plans).


def vip_claims_inputs(wildcards=None):
    """What ViP's claims compare: accuracies and DP losses of runs the tables already train."""
    tasks = ("linear_probe", "few_shot", "dp_finetune", "coco", "ade20k")
    return {
        "catalogue": claims_catalogue("vip"),
        "results": sorted(
            f"{EVALUATE}/{p}.json" for p, e in EVALUATIONS.items() if e.task in tasks
        ),
        "metrics": [f"{dp_run(name)}/metrics.jsonl" for name in DP_RUNS],
        "privacy": dp_ledgers(DP_RUNS),
    }


# DP-RandP Tables 8 and 9 (computational cost): Phase I metrics, feature-cache job times, runs.
from dpvip.plan.dprandp_rows import COST_TABLES as DPRANDP_COST_TABLES

DPRANDP_PROBE_STUDY = "dprandp_probe_cifar"  # Tables 8 and 9 time the CIFAR-10 probe


def dprandp_cost_phase1(table):
    """The Phase I runs whose metrics Table 8 times (all of them: ours beside the paper's one)."""
    return list(RANDP_PHASE1) if table == "table8" else []


def dprandp_cost_features(table):
    """The feature caches of the CIFAR-10 probe, whose job wall times Table 8 reads."""
    if table != "table8" or DPRANDP_PROBE_STUDY not in TRANSFER_STUDIES:
        return []
    return [f.path for f in TRANSFER_PLAN.study_features(DPRANDP_PROBE_STUDY)]


def dprandp_cost_inputs(wildcards):
    """What a DP-RandP cost table reads: Phase I metrics and the probe's feature-cache
    benchmarks (Table 8), the private runs (Table 9), the probe study (both, when configured).
    A benchmark file is a product of its rule, so it can be an input."""
    table = wildcards.table
    return {
        "paper_values": DPRANDP_VALUES,
        "phase1": [
            f"{DPRANDP}/phase1/{name}/metrics.jsonl"
            for name in dprandp_cost_phase1(table)
        ],
        "features": [
            f"{BENCHMARKS}/dp_transfer/features/{path}.tsv"
            for path in dprandp_cost_features(table)
        ],
        "probe": (
            [f"{TRANSFER}/{DPRANDP_PROBE_STUDY}.json"]
            if DPRANDP_PROBE_STUDY in TRANSFER_STUDIES
            else []
        ),
        "results": dprandp_results(table)[1],
    }


# The bundle's privacy statement: which DP results each published output is built from.


def privacy_sources():
    """{published table or figure: the result files of the DP runs it is built from}: what the
    bundle's privacy statement reads the mechanisms from."""
    sources = {"vip_dp_runs": dp_ledgers(DP_RUNS)}
    sources |= {figure: dp_ledgers(names) for figure, names in DP_FIGURES.items()}
    for table in VIP_TABLES:
        sources[table] = evaluation_files(table) + dp_ledgers(vip_table_runs(table))
    for figure in ("vip_figure1", "vip_figure5"):
        backbones = sorted({e.backbone for e in EVAL_NEEDS[figure]})
        sources[figure] = evaluation_files(figure) + dp_ledgers(backbones)
    for name in (*DPRANDP_TABLES, *DPRANDP_FIGURES, *DPRANDP_COST_TABLES, "claims"):
        sources[f"dprandp_{name}"] = dprandp_results(name)[1]
    sources["dprandp_claims"] = sources["dprandp_claims"] + dprandp_claims_studies()
    sources |= {f"mehta_{t}": [f"{TRANSFER}/mehta_{t}.json"] for t in MEHTA_OUTPUTS}
    sources |= {
        f"dprandp_{t}": [f"{TRANSFER}/dprandp_probe_{PROBE_TABLES[t]}.json"]
        for t in PROBE_OUTPUTS
    }
    sources |= {t: studies for t, studies in mehta_appendix_tables().items()}
    sources["vip_claims"] = vip_claims_inputs()["privacy"]
    sources["mehta_claims"] = mehta_claims_studies()
    sources["claims"] = sorted(
        {p for name in CLAIM_TABLES.values() for p in sources[name]}
    )
    sources["README"] = sources["claims"]  # the bundle's README opens with the claims
    return sources


def mehta_appendix_tables():
    """{Mehta et al.'s Tables 6-10 this configuration builds: the study results each reads}
    (6 and 9 read none; all belong to the Mehta stage, so none without it)."""
    if not MEHTA_OUTPUTS:
        return {}
    tables = {
        f"mehta_{t}": [f"{TRANSFER}/mehta_{study}.json"] if study else []
        for t, study in MEHTA_HYPERPARAMETER_TABLES.items()
        if study is None or study in MEHTA_OUTPUTS
    }
    if MEHTA_THROUGHPUT_STUDY in MEHTA_OUTPUTS:
        tables["mehta_table10"] = [f"{TRANSFER}/mehta_{MEHTA_THROUGHPUT_STUDY}.json"]
    return tables


def mehta_claims_studies():
    """The studies Mehta et al.'s claims compare (those this configuration runs)."""
    wanted = ("table1", "table2", "table4", "table5", "figure1b", "figure2")
    return [f"{TRANSFER}/mehta_{t}.json" for t in MEHTA_OUTPUTS if t in wanted]


def dprandp_claims_studies():
    """The private linear probing studies DP-RandP's claims compare (Tables 4 and 5)."""
    wanted = ("dprandp_probe_cifar", "dprandp_probe_imagenet")
    return [f"{TRANSFER}/{study}.json" for study in wanted if study in TRANSFER_STUDIES]


def claims_catalogue(paper):
    """A paper's claim catalogue (read by dpvip.report.claims.catalogue from the dpvip folder): an input
    so that editing it remakes the paper's claims table."""
    return workflow_path(f"config/paper_values/claims/{paper}.yaml")


# The papers' claims tables behind the overview: {paper: table}.
CLAIM_TABLES = {"ViP": "vip_claims", "DP-RandP": "dprandp_claims"}
if mehta_claims_studies():
    CLAIM_TABLES = {
        "ViP": "vip_claims",
        "Mehta et al.": "mehta_claims",
        "DP-RandP": "dprandp_claims",
    }

PRIVACY_SOURCES = privacy_sources()


# The empirical privacy audit: each audited mechanism is read from one of its runs' ledgers.
from dpvip.plan.dprandp_runs import MAIN_TASK

EMPIRICAL = config["privacy"]["empirical"]


def audit_sources():
    """{mechanism: the result file of the run whose mechanism its audit runs}."""
    sources = {"dp_mae": dp_ledgers([VIP_BACKBONES.main_vip])[0]}
    if EVAL_PLAN.dp_dataset:
        sources["dp_finetune"] = (
            f"{EVALUATE}/dp_finetune/{VIP_BACKBONES.main_vip}/{EVAL_PLAN.dp_dataset}.json"
        )
    if (
        MAIN_TASK in RANDP_PLAN.tasks
    ):  # Phase III only: the cold start at the largest epsilon
        finite = [e for e in RANDP_PLAN.epsilons(MAIN_TASK) if e != float("inf")]
        run = RANDP_PLAN.run(MAIN_TASK, None, max(finite), RANDP_PLAN.seeds[0], "none")
        sources["dprandp_phase3"] = f"{DPRANDP}/{run.path}.json"
    studies = {"mehta_head": "mehta_table5", "dprandp_probe": "dprandp_probe_cifar"}
    for mechanism, study in studies.items():
        if study in TRANSFER_STUDIES:
            sources[mechanism] = f"{TRANSFER}/{study}.json"
    return {m: path for m, path in sources.items() if m in EMPIRICAL["mechanisms"]}


AUDIT_SOURCES = audit_sources()
