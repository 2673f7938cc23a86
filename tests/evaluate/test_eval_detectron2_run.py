"""The detectron2 backend's side of the contract: the command it runs (checked against a
stand-in train script that records its arguments and environment and writes metrics the way
detectron2 does), and the AP it reads back."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from dpvip.errors import DpvipInputError
from dpvip.evaluate.detectron2_run import final_scores, run_vitdet
from dpvip.models import MAESettings
from dpvip.models.checkpoint import save_mae
from dpvip.models.mae import MaskedAutoencoder

FAKE_TRAIN = """
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
out = Path(next(a.split("=", 1)[1] for a in args if a.startswith("train.output_dir=")))
out.mkdir(parents=True)
(out.parent / "seen.json").write_text(json.dumps({"args": args, "datasets": os.environ["DETECTRON2_DATASETS"]}))
records = [{"iteration": 19, "total_loss": 2.0}, \
{"iteration": 99, "bbox/AP": 40.5, "bbox/AP50": 61.0, "segm/AP": 36.25, "segm/AP50": 58.0}]
(out / "metrics.json").write_text("".join(json.dumps(r) + "\\n" for r in records))
"""


@pytest.fixture
def checkpoint(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "vip.pt"
    save_mae(MaskedAutoencoder(MAESettings("pico", image_size=32, patch_size=4)), path, {})
    return path


def options(tmp_path) -> dict:
    script = tmp_path / "lazyconfig_train_net.py"
    script.write_text(FAKE_TRAIN)
    return {
        "python": sys.executable,
        "train_script": str(script),
        "config_file": "projects/ViTDet/configs/COCO/mask_rcnn_vitdet_b_100ep.py",
        "gpus": 8,
        "overrides": ["train.max_iter=100"],
    }


def test_detectron2_trains_from_the_converted_checkpoint_and_its_ap_is_read_back(tmp_path, checkpoint):
    work = tmp_path / "work"
    scores = run_vitdet(checkpoint, tmp_path / "datasets" / "coco", options(tmp_path), work)
    assert (scores["ap_box"], scores["ap_mask"], scores["ap50_box"], scores["iteration"]) == (40.5, 36.25, 61.0, 99)
    seen = json.loads((work / "seen.json").read_text())
    assert seen["datasets"] == str(tmp_path / "datasets")
    assert seen["args"][:4] == [
        "--config-file",
        "projects/ViTDet/configs/COCO/mask_rcnn_vitdet_b_100ep.py",
        "--num-gpus",
        "8",
    ]
    assert f"train.init_checkpoint={work / 'vitdet_init.pth'}" in seen["args"] and "train.max_iter=100" in seen["args"]
    assert "model.backbone.net.pretrain_img_size=32" in seen["args"]
    converted = torch.load(work / "vitdet_init.pth")
    assert "backbone.net.pos_embed" in converted["model"]


def test_a_failed_detectron2_run_points_at_its_log(tmp_path, checkpoint):
    settings = options(tmp_path)
    (tmp_path / "lazyconfig_train_net.py").write_text("import sys; print('CUDA error'); sys.exit(3)")
    with pytest.raises(DpvipInputError, match="detectron2 ViTDet exited with 3; see .*detectron2.log"):
        run_vitdet(checkpoint, tmp_path / "coco", settings, tmp_path / "work")
    assert "CUDA error" in (tmp_path / "work" / "detectron2.log").read_text()


def test_missing_settings_and_a_misnamed_coco_folder_are_refused(tmp_path, checkpoint):
    with pytest.raises(DpvipInputError, match="evaluate.coco.detectron2.train_script is not set"):
        run_vitdet(checkpoint, tmp_path / "coco", options(tmp_path) | {"train_script": None}, tmp_path / "work")
    with pytest.raises(DpvipInputError, match="must be a folder named 'coco'"):
        run_vitdet(checkpoint, tmp_path / "mscoco", options(tmp_path), tmp_path / "work")


def test_metrics_without_an_evaluation_are_refused(tmp_path):
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"iteration": 5, "total_loss": 1.0}) + "\n")
    with pytest.raises(DpvipInputError, match="holds no COCO evaluation"):
        final_scores(metrics)
