# ViP's private pre-training data in LAION format: results/data/laion/index.json, whose
# per-shard member tables let training read any sample without scanning tar headers.
# data.laion.source says where the shards come from:
#   natural      the embedded stand-in: crops of scikit-image/scikit-learn photographs,
#                one job per shard (each a pure function of the settings), then the index
#   img2dataset  one job downloads url_list into results/data/laion/shards/ and indexes it
#   shards       one job indexes existing LAION shards where they lie (read when it runs)
# Checked here, without torch, so a bad value stops before any job.
from dpvip.data.natural import NaturalSpec

LAION = config["data"]["laion"]
LAION_DIR = f"{RESULTS}/data/laion"
LAION_INDEX = f"{LAION_DIR}/index.json"
LAION_SOURCES = ("natural", "img2dataset", "shards")
LAION_NEEDS = {"natural": "images", "img2dataset": "url_list", "shards": "shards"}
LAION_PROBLEM = None
if LAION["source"] not in LAION_SOURCES:
    LAION_PROBLEM = (
        "source",
        f"'{LAION['source']}' is not one of {', '.join(LAION_SOURCES)}",
    )
elif LAION[LAION_NEEDS[LAION["source"]]] is None:
    LAION_PROBLEM = (
        LAION_NEEDS[LAION["source"]],
        f"source '{LAION['source']}' needs it",
    )
if LAION_PROBLEM:
    raise WorkflowError(
        "invalid configuration: config key 'data.laion.{}': {}".format(*LAION_PROBLEM)
    )
LAION_SHARDS = []
LAION_NATURAL_VALUES = None
if LAION["source"] == "natural":
    try:
        LAION_NATURAL = NaturalSpec.from_config(LAION, where="config key 'data.laion'")
    except DpvipInputError as err:
        raise WorkflowError(f"invalid configuration: {err}") from None
    LAION_NATURAL_VALUES = {
        key: LAION[key] for key in ("images", "resolution", "shard_size", "seed")
    }
    LAION_SHARDS = [f"{LAION_DIR}/{shard_name(s)}" for s in range(LAION_NATURAL.shards)]

    rule laion_natural_shard:
        output:
            f"{LAION_DIR}/{{shard}}.tar",
        log:
            f"{LOGS}/data/laion/{{shard}}.log",
        benchmark:
            f"{BENCHMARKS}/data/laion/{{shard}}.tsv"
        conda:
            ENV
        params:
            natural=LAION_NATURAL_VALUES,
        script:
            "../workflow_scripts/laion_natural_shard.py"


if LAION["source"] == "img2dataset":

    rule laion_download:
        output:
            LAION_INDEX,
        log:
            f"{LOGS}/data/laion/download.log",
        benchmark:
            f"{BENCHMARKS}/data/laion/download.tsv"
        conda:
            # img2dataset pins pandas<3, which the main environment does not meet
            "../envs/ingest.yaml"
        threads: LAION["processes"]
        params:
            url_list=LAION["url_list"],  # the user's data: relative to the working directory
            data_digest=spec_digests({"path": LAION["url_list"]}),
            settings={
                "image_size": LAION["resolution"],
                "resize_mode": LAION["resize_mode"],
                "processes": LAION["processes"],
                "threads": LAION["threads"],
                "shard_size": LAION["shard_size"],
                "timeout": LAION["timeout"],
                "retries": LAION["retries"],
                "url_column": LAION["url_column"],
                "caption_column": LAION["caption_column"],
            },
            checksums=LAION["checksums"],
        script:
            "../workflow_scripts/laion_download.py"

else:

    rule laion_index:
        input:
            # shards are deterministic: one regenerated alone does not make it stale
            [ancient(path) for path in LAION_SHARDS],
        output:
            LAION_INDEX,
        log:
            f"{LOGS}/data/laion/index.log",
        benchmark:
            f"{BENCHMARKS}/data/laion/index.tsv"
        conda:
            ENV
        params:
            source=LAION["source"],
            natural=LAION_NATURAL_VALUES,
            shards=LAION["shards"],  # the user's data: relative to the working directory
            data_digest=spec_digests(LAION),
            checksums=LAION["checksums"],
            threads=LAION["threads"],
        script:
            "../workflow_scripts/laion_index.py"
