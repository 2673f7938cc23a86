"""COCO with detectron2's own ViTDet (the paper's route, ViP A.4: "the default hyperparameter
config in Detectron2 for ViTDet-Base"), for clusters that have detectron2 installed
(envs/detectron2.yaml; it is not a dependency of dpvip).

Our checkpoint's encoder is converted to detectron2's key names (`detectron2_convert`), then
detectron2's `tools/lazyconfig_train_net.py` trains and evaluates its ViTDet config from it
in detectron2's own Python, through `detectron2_launch.py`, which first registers the
COCO-format sets under dpvip's own dataset names: COCO 2017 in its layout or the generated
stand-in in its own (`<split>.json`, `<split>/<id>.png`), each with its own categories. The
box and mask AP are read back from the `metrics.json` detectron2 writes in its output folder,
from the records this run wrote only. The run resumes (`--resume`) from the last checkpoint
of an interrupted run of the same command; an output folder left by another command is
cleared first, and a finished run's output (its 265 MB `model_final.pth`) is removed once its
AP is read.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
from pathlib import Path

from dpvip.errors import DpvipInputError
from dpvip.evaluate.detectron2_convert import convert_checkpoint
from dpvip.plan.vip_evaluations import DETECTRON2_PATCH as VITDET_PATCH

LAUNCHER = Path(__file__).with_name("detectron2_launch.py")
# Our own names: detectron2's builtin coco_2017_* carry COCO's 80 class names as metadata,
# which a set with other categories (the stand-in's shapes) may not be registered under.
DATASET_NAMES = {"train": "dpvip_coco_train", "val": "dpvip_coco_val"}


def dataset_files(files: dict) -> dict:
    """{dataset name: {json, image_root}} of the train and val sets (jobs.coco_files' paths)."""
    return {
        DATASET_NAMES[split]: {"json": str(files[f"{split}_json"]), "image_root": str(files[f"{split}_root"])}
        for split in ("train", "val")
    }


def _counts(annotations: Path) -> tuple[int, int]:
    """(categories, images) of a COCO annotation file."""
    try:
        record = json.loads(annotations.read_text())
        return len(record["categories"]), len(record["images"])
    except (OSError, ValueError, KeyError) as err:
        raise DpvipInputError(f"{annotations} is not a COCO annotation file: {err}") from None


def vitdet_command(
    options: dict,
    checkpoint: Path,
    output_dir: Path,
    vit: dict,
    classes: int,
    bitmasks: bool,
    score_threshold: float | None = None,
) -> list[str]:
    """The launcher's command: detectron2's ViTDet config on dpvip's registered sets, sized to
    our encoder, initialised from `checkpoint`; `bitmasks` for RLE masks (the stand-in's);
    `score_threshold`: the boxes kept for scoring (evaluate.coco.score_threshold)."""
    depth = vit["depth"]
    overrides = [
        f"train.init_checkpoint={checkpoint}",
        f"train.output_dir={output_dir}",
        f"dataloader.train.dataset.names={DATASET_NAMES['train']}",
        f"dataloader.test.dataset.names={DATASET_NAMES['val']}",
        f"dataloader.evaluator.dataset_name={DATASET_NAMES['val']}",
        # both tasks always: left to infer them from the predictions, the evaluator scores
        # bbox only when nothing is detected, and the result would hold no mask AP
        "dataloader.evaluator.tasks=[bbox,segm]",
        f"model.roi_heads.num_classes={classes}",
        *(f"model.backbone.net.{key}={vit[key]}" for key in ("embed_dim", "depth", "num_heads", "mlp_ratio")),
        f"model.backbone.net.pretrain_img_size={vit['pretrain_img_size']}",
        # ViTDet: windowed attention but in every third block (global at 2, 5, 8, 11 of 12)
        f"model.backbone.net.window_block_indexes={[i for i in range(depth) if i % 3 != 2]}".replace(" ", ""),
        # the default is polygons; RLE masks, which the stand-in writes, need bitmasks
        *(["dataloader.train.mapper.instance_mask_format=bitmask"] if bitmasks else []),
        *(
            [f"model.roi_heads.box_predictor.test_score_thresh={score_threshold}"]
            if score_threshold is not None
            else []
        ),
        *options.get("overrides", []),
    ]
    return [
        options["python"],
        str(LAUNCHER),
        "--config-file",
        options["config_file"],
        "--num-gpus",
        str(options["gpus"]),
        "--resume",  # from output_dir's last checkpoint, if an interrupted run left one
        *overrides,
    ]


def final_scores(metrics_file: Path, start: int = 0) -> dict:
    """{"ap_box", "ap_mask", ...} from the last record of detectron2's metrics.json (one JSON
    object per line) that holds COCO evaluation results, among those written from byte
    `start` on (this run's: detectron2 appends to the file). An AP that detectron2 reports as
    NaN (nothing detected to score) is None, and `undefined` says which and why."""
    if not metrics_file.is_file():
        raise DpvipInputError(f"detectron2 wrote no {metrics_file}")
    with metrics_file.open("rb") as handle:
        handle.seek(start)
        lines = handle.read().decode().splitlines()
    records = map(json.loads, filter(None, lines))
    evaluated = [record for record in records if "bbox/AP" in record and "segm/AP" in record]
    if not evaluated:
        raise DpvipInputError(f"{metrics_file} holds no COCO evaluation (bbox/AP and segm/AP) from this run")
    last = evaluated[-1]
    found = {
        (f"ap{level}_{suffix}", f"{kind}/AP{level}"): float(last[f"{kind}/AP{level}"])
        for kind, suffix in (("bbox", "box"), ("segm", "mask"))
        for level in ("", "50", "75")
        if f"{kind}/AP{level}" in last
    }
    scores = {key: None if math.isnan(value) else value for (key, _), value in found.items()}
    undefined = [name for (_, name), value in found.items() if math.isnan(value)]
    if undefined:
        scores["undefined"] = (
            f"detectron2 reported NaN for {', '.join(undefined)}: no detection above the score threshold "
            "to score (too few iterations, or too high a threshold); the AP is undefined, not 0"
        )
    return scores | {"iteration": last.get("iteration")}


def _fresh_output(output: Path, command: list[str]) -> None:
    """Keep `output` for a resume only if the same command left it; else start it empty."""
    stamp = output / "dpvip_command.sha256"
    digest = hashlib.sha256(json.dumps(command).encode()).hexdigest()
    if output.exists() and (not stamp.is_file() or stamp.read_text().strip() != digest):
        shutil.rmtree(output)
    output.mkdir(parents=True, exist_ok=True)
    stamp.write_text(digest + "\n")


def run_vitdet(
    checkpoint: str | Path,
    files: dict,
    standin: bool,
    options: dict,
    work: str | Path,
    score_threshold: float | None = None,
) -> dict:
    """Convert, train and evaluate with detectron2 on the sets in `files` (jobs.coco_files: COCO
    2017 or the stand-in); returns the AP (points, as detectron2 reports them), the image
    counts and what ran. The detectron2 log is `work/detectron2.log`."""
    for key in ("python", "train_script", "config_file"):
        if not options.get(key):
            raise DpvipInputError(f"evaluate.coco.detectron2.{key} is not set (the detectron2 backend needs it)")
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    converted = convert_checkpoint(checkpoint, work / "vitdet_init.pth")
    patch = converted["vit"]["patch_size"]
    if patch != VITDET_PATCH:
        raise DpvipInputError(
            f"evaluate.coco.backend detectron2 needs an encoder of patch size {VITDET_PATCH} (ViTDet's feature "
            f"pyramid and anchors assume stride {VITDET_PATCH}); this checkpoint's is {patch}: "
            "use backend torchvision for it"
        )
    registered = dataset_files(files)
    classes, train_images = _counts(Path(registered[DATASET_NAMES["train"]]["json"]))
    output = work / "output"
    command = vitdet_command(
        options, work / "vitdet_init.pth", output, converted["vit"], classes, standin, score_threshold
    )
    _fresh_output(output, command)
    metrics = output / "metrics.json"
    start = metrics.stat().st_size if metrics.is_file() else 0  # earlier attempts' records are not this run's
    env = os.environ | {
        "DPVIP_DETECTRON2_DATASETS": json.dumps(registered),
        "DPVIP_DETECTRON2_TRAIN_SCRIPT": str(options["train_script"]),
    }
    with (work / "detectron2.log").open("a") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode != 0:
        raise DpvipInputError(f"detectron2 ViTDet exited with {done.returncode}; see {work / 'detectron2.log'}")
    scores = final_scores(metrics, start)
    shutil.rmtree(output)  # read: its checkpoints (model_final.pth, 265 MB at ViT-B) are not results
    counts = {
        "train_images": train_images,
        "val_images": _counts(Path(registered[DATASET_NAMES["val"]]["json"]))[1],
    }
    return scores | counts | {"command": command, "datasets": registered, "conversion": converted}
