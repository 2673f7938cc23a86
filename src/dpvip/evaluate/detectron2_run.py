"""COCO with detectron2's own ViTDet (the paper's route, ViP A.4: "the default hyperparameter
config in Detectron2 for ViTDet-Base"), for clusters that have detectron2 installed
(envs/detectron2.yaml; it is not a dependency of dpvip).

Our checkpoint's encoder is converted to detectron2's key names (`detectron2_convert`), then
detectron2's `tools/lazyconfig_train_net.py` trains and evaluates its ViTDet config from it
in detectron2's own Python, with COCO found the way detectron2 finds it
(DETECTRON2_DATASETS=<parent of the coco folder>). The box and mask AP are read back from
the `metrics.json` detectron2 writes in its output folder.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from dpvip.errors import DpvipInputError
from dpvip.evaluate.detectron2_convert import convert_checkpoint


def vitdet_command(options: dict, checkpoint: Path, output_dir: Path, vit: dict) -> list[str]:
    """detectron2's training command for its ViTDet config, initialised from `checkpoint`."""
    overrides = [
        f"train.init_checkpoint={checkpoint}",
        f"train.output_dir={output_dir}",
        f"model.backbone.net.pretrain_img_size={vit['pretrain_img_size']}",
        *options.get("overrides", []),
    ]
    return [
        options["python"],
        options["train_script"],
        "--config-file",
        options["config_file"],
        "--num-gpus",
        str(options["gpus"]),
        *overrides,
    ]


def final_scores(metrics_file: Path) -> dict:
    """{"ap_box", "ap_mask", ...} from the last record of detectron2's metrics.json (one JSON
    object per line) that holds COCO evaluation results."""
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
    scores = {
        f"ap{level}_{suffix}": float(last[f"{kind}/AP{level}"])
        for kind, suffix in (("bbox", "box"), ("segm", "mask"))
        for level in ("", "50", "75")
        if f"{kind}/AP{level}" in last
    }
    return scores | {"iteration": last.get("iteration")}


def run_vitdet(checkpoint: str | Path, coco_root: str | Path, options: dict, work: str | Path) -> dict:
    """Convert, train and evaluate with detectron2; returns the AP (percent, as detectron2
    reports them) and what ran. The detectron2 log is `work/detectron2.log`."""
    for key in ("python", "train_script", "config_file"):
        if not options.get(key):
            raise DpvipInputError(f"evaluate.coco.detectron2.{key} is not set (the detectron2 backend needs it)")
    coco_root, work = Path(coco_root), Path(work)
    if coco_root.name != "coco":
        raise DpvipInputError(
            f"evaluate.coco.root {coco_root} must be a folder named 'coco' "
            "(detectron2's builtin COCO datasets look for <DETECTRON2_DATASETS>/coco)"
        )
    work.mkdir(parents=True, exist_ok=True)
    converted = convert_checkpoint(checkpoint, work / "vitdet_init.pth")
    command = vitdet_command(options, work / "vitdet_init.pth", work / "output", converted["vit"])
    env = os.environ | {"DETECTRON2_DATASETS": str(coco_root.parent)}
    with (work / "detectron2.log").open("w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode != 0:
        raise DpvipInputError(f"detectron2 ViTDet exited with {done.returncode}; see {work / 'detectron2.log'}")
    return final_scores(work / "output" / "metrics.json") | {"command": command, "conversion": converted}
