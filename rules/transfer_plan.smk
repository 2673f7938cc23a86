# The DP-transfer plan (torch-free, checked before any job): what rules/dp_transfer.smk
# and the Mehta et al. and DP-RandP probe tables run. Included right after common.smk.
# DP transfer: feature caches and the linear-head studies of Mehta et al. and DP-RandP.
from dpvip.plan.transfer import MEHTA_FIGURES, MEHTA_TABLES, PROBE_TABLES, STUDIES
from dpvip.plan.transfer import TransferPlan
from dpvip.plan.transfer import MEHTA_HYPERPARAMETER_TABLES, MEHTA_THROUGHPUT_STUDY

TRANSFER = f"{RESULTS}/dp_transfer"
TRANSFER_CONFIG = config["dp_transfer"]
MEHTA_VALUES = workflow_path(f"{config['paper_values']}/mehta.csv")
MEHTA_SETTINGS = workflow_path(f"{config['paper_values']}/mehta_settings.yaml")
try:
    TRANSFER_PLAN = TransferPlan(TRANSFER_CONFIG, config["privacy"])
    FEATURE_SETS = TRANSFER_PLAN.feature_sets()
except DpvipInputError as err:
    raise WorkflowError(f"invalid configuration: {err}") from None
# The studies some configured table or figure shows (a config without Mehta has none).
TRANSFER_STUDIES = [study for study in STUDIES if TRANSFER_PLAN.runs(study)]
MEHTA_OUTPUTS = [
    s.removeprefix("mehta_") for s in TRANSFER_STUDIES if s.startswith("mehta_")
]
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
try:  # an image size the encoder's patches do not tile stops before any job too
    TRANSFER_PLAN.check_patch_sizes(
        {"syn_vip": SYN_VIP["patch_size"], "dp_pretrain": DP["settings"]["patch_size"]}
    )
except DpvipInputError as err:
    raise WorkflowError(f"invalid configuration: {err}") from None


def study_caches(study):
    return {
        f.path: f"{TRANSFER}/features/{f.path}"
        for f in TRANSFER_PLAN.study_features(study)
    }
