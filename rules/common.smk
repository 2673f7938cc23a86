# Configuration validation and the paths every stage shares.
import re
import sys
from pathlib import Path

# The Snakefile plans with this checkout's library even where dpvip is not installed (it
# only needs jsonschema and yaml, which Snakemake brings), and its jobs run it: Snakemake
# appends a script's folder to sys.path, after an installed dpvip, so the library goes
# first on the jobs' PYTHONPATH (a cluster job re-reads this file and sets it again).
SRC = str(Path(DPVIP_DIR) / "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)

import dpvip

if Path(dpvip.__file__).resolve().parent != (Path(SRC) / "dpvip").resolve():
    raise WorkflowError(
        f"this Snakefile comes with the dpvip library in {SRC}, but dpvip was already imported "
        f"from {Path(dpvip.__file__).parent}: import dpvip after the module block (or from {SRC}), "
        "so that one copy plans and runs"
    )

from dpvip.logs import run_jobs_with_library

run_jobs_with_library(
    SRC
)  # a job that imports another copy stops, naming both (dpvip.logs)

from dpvip.config import layered_config
from dpvip.errors import DpvipInputError

# The config over the embedded default (config/config.yaml), as --configfile layers it: a
# workflow that imports dpvip as a module may give a partial config, or none.
try:
    _complete = layered_config(config)  # the package's schema: config/schema.yaml
except DpvipInputError as err:
    raise WorkflowError(f"invalid configuration: {err}") from None
config.clear()
config.update(_complete)

# A dry run succeeds without the data (a login node may not mount it), but names each
# configured data path that is missing, so a typo shows now rather than in the job.
from snakemake.logging import logger
from dpvip.plan.data_paths import check_labelled_sets, missing_data_paths
from dpvip.plan.data_digest import spec_digests

for _missing in missing_data_paths(config):
    logger.warning(f"warning: {_missing}")
try:
    check_labelled_sets(config)
except DpvipInputError as err:
    raise WorkflowError(f"invalid configuration: {err}") from None


def working_directory(wildcards):
    """Where the nested Snakemake runs (budget, report) plan: this run's working directory
    (a function, not a string: the path is the run's, not a file prefix of the rule)."""
    return os.getcwd()


# Every DP job finds its run's secret key in the key store (outside results/) and deletes it
# when the run is done unless privacy.keep_keys; jobs inherit the store from the environment.
from dpvip.privacy.randomness import use_key_store

use_key_store(config["privacy"]["key_dir"], config["privacy"]["keep_keys"])


def workflow_path(path):
    """The workflow's own files (paper values, claims, profiles) are found from the dpvip
    folder, so any working directory works, and dpvip works as a module."""
    return str(Path(DPVIP_DIR) / path)


RESULTS = "results"
TABLES = f"{RESULTS}/tables"
FIGURES = f"{RESULTS}/figures"
LOGS = f"{RESULTS}/logs"
BENCHMARKS = f"{RESULTS}/benchmarks"
BUNDLE = f"{RESULTS}/bundle"
ENV = "../envs/dpvip.yaml"


def table_files(name):
    return multiext(f"{TABLES}/{name}", ".csv", ".md", ".tex")


def figure_files(name):
    return multiext(f"{FIGURES}/{name}", ".png", ".pdf")


# Synthetic datasets, checked here (without torch) so a bad value stops before any job.
from dpvip.synthetic.shards import shard_name, shard_stem
from dpvip.synthetic.spec import DatasetSpec

SYNTHETIC = f"{RESULTS}/synthetic"
SYNTHETIC_SPECS = {}
for _name, _values in config["synthetic"]["datasets"].items():
    try:
        SYNTHETIC_SPECS[_name] = DatasetSpec.from_config(_name, _values)
    except DpvipInputError as err:
        raise WorkflowError(f"invalid configuration: {err}") from None

# Shards are deterministic: a lost shard is regenerated with the same bytes but a newer
# mtime, so rules that read shards take them as ancient() and do not rerun because of it.
SYNTHETIC_SHARDS = {
    name: [f"{SYNTHETIC}/{name}/{shard_name(s)}" for s in range(spec.shards)]
    for name, spec in SYNTHETIC_SPECS.items()
}
SYNTHETIC_INDEXES = [f"{SYNTHETIC}/{name}/index.json" for name in SYNTHETIC_SPECS]
SYNTHETIC_SHARD_BENCHMARKS = [
    ancient(f"{BENCHMARKS}/synthetic/{spec.name}/{shard_stem(s)}.tsv")
    for spec in SYNTHETIC_SPECS.values()
    for s in range(spec.shards)
]


def synthetic_shards(wildcards):
    return [ancient(path) for path in SYNTHETIC_SHARDS[wildcards.dataset]]


# (Syn)-ViP pre-training runs, checked here (without torch) before any job.
from dpvip.plan.pretrain import syn_vip_settings

PRETRAIN = f"{RESULTS}/pretrain"
SYN_VIP = config["pretrain"]["syn_vip"]
if SYN_VIP["dataset"] not in SYNTHETIC_SPECS:
    raise WorkflowError(
        f"invalid configuration: config key 'pretrain.syn_vip.dataset': '{SYN_VIP['dataset']}' "
        f"is not a synthetic dataset (known: {', '.join(SYNTHETIC_SPECS)})"
    )
try:
    SYN_VIP_SETTINGS = {
        model: syn_vip_settings(
            SYN_VIP, model, SYNTHETIC_SPECS[SYN_VIP["dataset"]].images
        )
        for model in SYN_VIP["models"]
    }
except DpvipInputError as err:
    raise WorkflowError(f"invalid configuration: {err}") from None


def syn_vip_run(model):
    return f"{PRETRAIN}/syn_vip_{model}"


# DP pre-training runs (ViP step 2): the main runs and the ablations, checked here.
from dpvip.plan.pretrain import shortened
from dpvip.plan.vip_runs import expand_runs, figure_runs, synthetic_variants

DP_PRETRAIN = f"{RESULTS}/dp_pretrain"
DP = config["dp_pretrain"]
DP_DATASET_EXAMPLES = config.get("data", {}).get(DP["dataset"], {}).get("images")
# Shorter (Syn)-ViP pre-trainings of the ablation model, which Figure 3b's runs start from:
# {run name: (model, epochs)}, trained by the same rule as the sizes of pretrain.syn_vip.
SYN_VIP_VARIANTS = synthetic_variants(DP)
try:
    for _name, (_model, _epochs) in SYN_VIP_VARIANTS.items():
        SYN_VIP_SETTINGS[_name] = syn_vip_settings(
            shortened(SYN_VIP, _epochs),
            _model,
            SYNTHETIC_SPECS[SYN_VIP["dataset"]].images,
        )
    DP_RUNS = expand_runs(
        DP,
        [*SYN_VIP["models"], *SYN_VIP_VARIANTS],
        DP_DATASET_EXAMPLES,
        config["privacy"],
    )
except DpvipInputError as err:
    raise WorkflowError(f"invalid configuration: {err}") from None


def syn_vip_values(run):
    """The pretrain.syn_vip section as one (Syn)-ViP run takes it (a variant: its epochs)."""
    if run in SYN_VIP_VARIANTS:
        return shortened(SYN_VIP, SYN_VIP_VARIANTS[run][1])
    return SYN_VIP


def syn_vip_model(run):
    """The MAE size of a (Syn)-ViP run."""
    return SYN_VIP_VARIANTS[run][0] if run in SYN_VIP_VARIANTS else run


# On Slurm a training run's processes start with srun, one torchrun per node meeting at a
# c10d rendezvous (dpvip.train.launch). A multi-node run is an MPI-style job, which the
# slurm executor leaves to launch itself; one node is a plain job (the executor's srun step).
def launch_resources(nodes):
    return {"nodes": nodes} | ({"mpi": "srun", "tasks": nodes} if nodes > 1 else {})


DP_LAUNCH = launch_resources(DP["nodes"])
SYN_VIP_LAUNCH = launch_resources(SYN_VIP["nodes"])


def evaluation_gpus(wildcards):
    """GPUs the job asks Slurm for: detectron2's COCO backend starts detectron2.gpus processes
    itself; every other evaluation takes evaluate.gpus per process."""
    task = EVALUATIONS[wildcards.evaluation].task
    if task == "coco" and EVAL["coco"].get("backend") == "detectron2":
        return EVAL["coco"]["detectron2"]["gpus"]
    return EVAL["gpus"] * evaluation_processes(wildcards)


def evaluation_launch(wildcards, key):
    """Processes per node or nodes of an evaluation job (its task's section; default 1)."""
    return EVAL.get(EVALUATIONS[wildcards.evaluation].task, {}).get(key, 1)


def evaluation_processes(wildcards):
    return evaluation_launch(wildcards, "processes")


def evaluation_nodes(wildcards):
    return evaluation_launch(wildcards, "nodes")


def evaluation_mpi(wildcards):
    """A multi-node job is MPI-style: the slurm executor leaves its launch to the job."""
    return "srun" if evaluation_nodes(wildcards) > 1 else None


def evaluation_tasks(wildcards):
    return evaluation_nodes(wildcards) if evaluation_nodes(wildcards) > 1 else None


DP_FIGURES = {
    name: runs
    for name, runs in figure_runs(DP, DP_RUNS, DP_DATASET_EXAMPLES).items()
    if runs
}


def dp_run(name):
    return f"{DP_PRETRAIN}/{name}"


def dp_ledgers(names):
    """The privacy.json of the DP-MAE runs among `names` (backbones of any kind)."""
    return [f"{dp_run(name)}/privacy.json" for name in names if name in DP_RUNS]


def dp_run_inputs(wildcards):
    """The private dataset's index, and the (Syn)-ViP checkpoint the run starts from."""
    inputs = {"index": f"{RESULTS}/data/{DP['dataset']}/index.json"}
    init = DP_RUNS[wildcards.run].init
    if init is not None:
        inputs["init"] = f"{syn_vip_run(init)}/model.pt"
    return inputs


def dp_figure_inputs(wildcards):
    return [
        f"{dp_run(name)}/{kind}"
        for name in DP_FIGURES[wildcards.figure]
        for kind in ("metrics.jsonl", "privacy.json")
    ]


# ViP evaluations: exactly the jobs some ViP table or figure cell needs, checked here.
from dpvip.plan.vip_evaluations import EvaluationPlan, all_evaluations, check_detectron2
from dpvip.report.common.paper_values import load_paper_values, paper_table
from dpvip.plan.vip_rows import VIP_TABLES, Backbones, table_rows
from dpvip.plan.vip_runs import ablation_model

EVALUATE = f"{RESULTS}/evaluate"
EVAL = config["evaluate"]
VIP_VALUES = workflow_path(f"{config['paper_values']}/vip.csv")
_printed = load_paper_values(Path(VIP_VALUES).parent)
VIP_COLUMNS = {
    table: list(paper_table(_printed, "vip", table.removeprefix("vip_")).columns)
    for table in VIP_TABLES
}
VIP_BACKBONES = Backbones(
    SYN_VIP["models"],
    DP_RUNS,
    ablation_model(DP),
    {row: base["arch"] for row, base in EVAL["few_shot"]["baselines"].items()},
)
try:
    EVAL_PLAN = EvaluationPlan(EVAL, VIP_BACKBONES, config["privacy"])
    EVAL_NEEDS = all_evaluations(EVAL_PLAN, VIP_COLUMNS)
    check_detectron2(
        EVAL,
        [e for needs in EVAL_NEEDS.values() for e in needs],
        {f"syn_vip_{m}": SYN_VIP["patch_size"] for m in SYN_VIP["models"]}
        | {name: DP["settings"]["patch_size"] for name in DP_RUNS},
    )
except DpvipInputError as err:
    raise WorkflowError(f"invalid configuration: {err}") from None
EVALUATIONS = {e.path: e for needs in EVAL_NEEDS.values() for e in needs}


def evaluation_data_digest(wildcards):
    """The contents of the user's data the evaluation reads (its labelled set, or COCO's or
    ADE20K's root): a change inside a folder reruns it, not only a new path."""
    evaluation = EVALUATIONS[wildcards.evaluation]
    if evaluation.task in ("coco", "ade20k"):
        task = EVAL[evaluation.task]
        return spec_digests(task if task.get("source") == evaluation.task else {})
    return spec_digests(EVAL["datasets"].get(evaluation.dataset))


COCO_STANDIN = f"{RESULTS}/data/coco_standin"


def evaluation_inputs(wildcards):
    evaluation = EVALUATIONS[wildcards.evaluation]
    inputs = {"checkpoint": backbone_checkpoint(evaluation.backbone)}
    if evaluation.task == "coco" and EVAL["coco"]["source"] == "standin":
        inputs["standin"] = [
            f"{COCO_STANDIN}/{split}.json" for split in ("train", "val")
        ]
    return inputs


def evaluation_files(name):
    """The result files a ViP table or figure reads."""
    return [f"{EVALUATE}/{e.path}.json" for e in EVAL_NEEDS[name]]


def backbone_checkpoint(backbone):
    """[] for a CNN baseline from random initialisation (the embedded default)."""
    if backbone.startswith("syn_vip_"):
        return [f"{syn_vip_run(backbone.removeprefix('syn_vip_'))}/model.pt"]
    if backbone in DP_RUNS:
        return [f"{dp_run(backbone)}/model.pt"]
    arch = backbone.removeprefix("cnn_")
    paths = [
        b["checkpoint"]
        for b in EVAL["few_shot"]["baselines"].values()
        if b["arch"] == arch
    ]
    return [path for path in paths[:1] if path]


def vip_table_runs(table):
    """The DP runs in a ViP table's rows (their ledgers give its run facts)."""
    rows = table_rows(table, VIP_COLUMNS[table], VIP_BACKBONES)
    return sorted({b for row in rows for b, _ in row.cells.values() if b in DP_RUNS})


def vip_table_inputs(wildcards):
    """A ViP table's evaluation results, and the ledgers of the DP runs in its rows."""
    return {
        "paper_values": VIP_VALUES,
        "results": evaluation_files(wildcards.table),
        "privacy": dp_ledgers(vip_table_runs(wildcards.table)),
    }


def mae_shapes():
    """{backbone: (model, image size, patch size)} of every MAE the workflow trains."""
    shapes = {
        f"syn_vip_{m}": (m, SYN_VIP["image_size"], SYN_VIP["patch_size"])
        for m in SYN_VIP["models"]
    }
    for name, run in DP_RUNS.items():
        values = DP["settings"] | run.values
        shapes[name] = (run.model, values["image_size"], values["patch_size"])
    return shapes


# DP-RandP: Phase I pre-trainings and private runs, exactly those some DP-RandP table,
# figure or claim needs (dpvip.plan.dprandp_rows), checked here before any job.
from dpvip.plan.dprandp_runs import DPRandPPlan
from dpvip.plan.dprandp_private import private_settings
from dpvip.plan.dprandp_rows import FIGURES as DPRANDP_FIGURES
from dpvip.plan.dprandp_rows import TABLES as DPRANDP_TABLES
from dpvip.plan.dprandp_rows import all_runs, needs

DPRANDP = f"{RESULTS}/dprandp"
RANDP = config["dprandp"]
try:
    RANDP_PLAN = DPRandPPlan(RANDP, config["synthetic"]["datasets"], config["privacy"])
    RANDP_PHASE1 = {run.name: run for run in RANDP_PLAN.phase1_runs()}
    RANDP_RUNS = {run.path: run for run in all_runs(RANDP_PLAN)}
    RANDP_SETTINGS = {
        path: private_settings(RANDP_PLAN, run) for path, run in RANDP_RUNS.items()
    }
except DpvipInputError as err:
    raise WorkflowError(f"invalid configuration: {err}") from None
DPRANDP_VALUES = workflow_path(f"{config['paper_values']}/dprandp.csv")


def phase1_inputs(wildcards):
    dataset = RANDP_PHASE1[wildcards.phase1].dataset
    # Ancient, like the shards: a regenerated shard rewrites an identical index. A change
    # of the dataset's config reruns Phase I through its `data` param instead.
    return {
        "index": ancient(f"{SYNTHETIC}/{dataset}/index.json"),
        "shards": [ancient(path) for path in SYNTHETIC_SHARDS[dataset]],
    }


def phase1_section(name):
    """What a Phase I run reads of `dprandp.phase1` (its model, dataset and method are in its
    name), so that changing MoCo's settings does not rerun the other runs."""
    run = RANDP_PHASE1[name]
    skip = {"model", "dataset", "method"} | (
        {"moco"} if run.method != "moco" else set()
    )
    return {key: value for key, value in RANDP["phase1"].items() if key not in skip}


def private_run_inputs(wildcards):
    """The Phase I checkpoint a warm run starts from (nothing for a cold run)."""
    run = RANDP_RUNS[wildcards.randp_run]
    return {"init": [f"{DPRANDP}/{RANDP_PHASE1[run.init].path}"] if run.warm else []}


def dprandp_results(name):
    """([run path], [result file]) of what a DP-RandP table, figure or the claims read."""
    paths = [run.path for run in needs(RANDP_PLAN, name)]
    return paths, [f"{DPRANDP}/{path}.json" for path in paths]
