"""COCO with detectron2's own ViTDet (the paper's route, ViP A.4: "the default hyperparameter
config in Detectron2 for ViTDet-Base"), for clusters that have detectron2 installed
(envs/detectron2.yaml; it is not a dependency of dpvip).

Our checkpoint's encoder is converted to detectron2's key names (`detectron2_convert`), then
detectron2's `tools/lazyconfig_train_net.py` trains and evaluates its ViTDet config from it
in detectron2's own Python, through `detectron2_launch.py`, which first registers the
COCO-format sets under dpvip's own dataset names: COCO 2017 in its layout or the generated
stand-in in its own (`<split>.json`, `<split>/<id>.png`), each with its own categories. The
box and mask AP are read back from the `metrics.json` detectron2 writes in its output folder.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

from dpvip.errors import DpvipInputError
from dpvip.evaluate.detectron2_convert import convert_checkpoint

LAUNCHER = Path(__file__).with_name("detectron2_launch.py")
# Our own names: detectron2's builtin coco_2017_* carry COCO's 80 class names as metadata,
# which a set with other categories (the stand-in's shapes) may not be registered under.
DATASET_NAMES = {"train": "dpvip_coco_train", "val": "dpvip_coco_val"}
VITDET_PATCH = 16  # ViTDet's simple feature pyramid and its anchors assume stride-16 features


def dataset_files(files: dict) -> dict:
    """{dataset name: {json, image_root}} of the train and val sets (jobs.coco_files' paths)."""
    return {
        DATASET_NAMES[split]: {"json": str(files[f"{split}_json"]), "image_root": str(files[f"{split}_root"])}
        for split in ("train", "val")
    }


def _categories(annotations: Path) -> int:
    try:
        return len(json.loads(annotations.read_text())["categories"])
    except (OSError, ValueError, KeyError) as err:
        raise DpvipInputError(f"{annotations} is not a COCO annotation file: {err}") from None


def vitdet_command(
    options: dict, checkpoint: Path, output_dir: Path, vit: dict, classes: int, bitmasks: bool
) -> list[str]:
    """The launcher's command: detectron2's ViTDet config on dpvip's registered sets, sized to
    our encoder, initialised from `checkpoint`; `bitmasks` for RLE masks (the stand-in's)."""
    depth = vit["depth"]
    overrides = [
        f"train.init_checkpoint={checkpoint}",
        f"train.output_dir={output_dir}",
        f"dataloader.train.dataset.names={DATASET_NAMES['train']}",
        f"dataloader.test.dataset.names={DATASET_NAMES['val']}",
        f"dataloader.evaluator.dataset_name={DATASET_NAMES['val']}",
        f"model.roi_heads.num_classes={classes}",
        *(f"model.backbone.net.{key}={vit[key]}" for key in ("embed_dim", "depth", "num_heads", "mlp_ratio")),
        f"model.backbone.net.pretrain_img_size={vit['pretrain_img_size']}",
        # ViTDet: windowed attention but in every third block (global at 2, 5, 8, 11 of 12)
        f"model.backbone.net.window_block_indexes={[i for i in range(depth) if i % 3 != 2]}".replace(" ", ""),
        # the default is polygons; RLE masks, which the stand-in writes, need bitmasks
        *(["dataloader.train.mapper.instance_mask_format=bitmask"] if bitmasks else []),
        *options.get("overrides", []),
    ]
    return [
        options["python"],
        str(LAUNCHER),
        "--config-file",
        options["config_file"],
        "--num-gpus",
        str(options["gpus"]),
        *overrides,
    ]


def final_scores(metrics_file: Path) -> dict:
    """{"ap_box", "ap_mask", ...} from the last record of detectron2's metrics.json (one JSON
    object per line) that holds COCO evaluation results. An AP that detectron2 reports as NaN
    (nothing detected to score) is None, and `undefined` says which and why."""
    if not metrics_file.is_file():
        raise DpvipInputError(f"detectron2 wrote no {metrics_file}")
    evaluated = [
        record
        for record in map(json.loads, metrics_file.read_text().splitlines())
        if "bbox/AP" in record and "segm/AP" in record
    ]
    if not evaluated:
        raise DpvipInputError(f"{metrics_file} holds no COCO evaluation (bbox/AP and segm/AP)")
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


def run_vitdet(checkpoint: str | Path, files: dict, standin: bool, options: dict, work: str | Path) -> dict:
    """Convert, train and evaluate with detectron2 on the sets in `files` (jobs.coco_files: COCO
    2017 or the stand-in); returns the AP (percent, as detectron2 reports them) and what ran.
    The detectron2 log is `work/detectron2.log`."""
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
    classes = _categories(Path(registered[DATASET_NAMES["train"]]["json"]))
    command = vitdet_command(options, work / "vitdet_init.pth", work / "output", converted["vit"], classes, standin)
    env = os.environ | {
        "DPVIP_DETECTRON2_DATASETS": json.dumps(registered),
        "DPVIP_DETECTRON2_TRAIN_SCRIPT": str(options["train_script"]),
    }
    with (work / "detectron2.log").open("w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode != 0:
        raise DpvipInputError(f"detectron2 ViTDet exited with {done.returncode}; see {work / 'detectron2.log'}")
    scores = final_scores(work / "output" / "metrics.json")
    return scores | {"command": command, "datasets": registered, "conversion": converted}
