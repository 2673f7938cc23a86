"""The detectron2 backend's side of the contract, without detectron2 (not on PyPI): what the
runner passes to it. A stand-in `detectron2` package records the datasets the launcher
registers, and a stand-in train script (loaded as lazyconfig_train_net.py is) records the
arguments it is started with, checks that every image of the registered sets is where the
registration says, and writes metrics the way detectron2 does."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from dpvip.errors import DpvipInputError
from dpvip.evaluate.coco_instances import whole_image_scores
from dpvip.evaluate.coco_standin import CocoStandIn, write_split
from dpvip.evaluate.detectron2_run import final_scores, run_vitdet
from dpvip.evaluate.jobs import coco_files
from dpvip.models import MAESettings
from dpvip.models.checkpoint import save_mae
from dpvip.models.mae import MaskedAutoencoder

FAKE_DETECTRON2 = {
    "detectron2/__init__.py": "",
    "detectron2/data/__init__.py": """
class DatasetCatalog:
    names = {}
    @classmethod
    def list(cls):
        return list(cls.names)
""",
    "detectron2/data/datasets.py": """
from detectron2.data import DatasetCatalog
def register_coco_instances(name, metadata, json_file, image_root):
    DatasetCatalog.names[name] = {"json": json_file, "image_root": image_root, "metadata": metadata}
""",
    "detectron2/engine.py": """
import argparse
def default_argument_parser():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config-file")
    parser.add_argument("--num-gpus", type=int, default=1)
    parser.add_argument("--num-machines", type=int, default=1)
    parser.add_argument("--machine-rank", type=int, default=0)
    parser.add_argument("--dist-url", default="auto")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("opts", nargs=argparse.REMAINDER)
    return parser
def launch(main, num_gpus, num_machines, machine_rank, dist_url, args):
    main(*args)
""",
}

FAKE_TRAIN = """
import json, os
from pathlib import Path
from detectron2.data import DatasetCatalog

def main(args):
    options = dict(opt.split("=", 1) for opt in args.opts)
    out = Path(options["train.output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    (out / "model_final.pth").write_bytes(b"weights")
    found = {}
    for name, entry in DatasetCatalog.names.items():
        images = json.loads(Path(entry["json"]).read_text())["images"]
        found[name] = all((Path(entry["image_root"]) / image["file_name"]).is_file() for image in images)
    seen = {"opts": args.opts, "config_file": args.config_file, "gpus": args.num_gpus, "resume": args.resume,
            "registered": DatasetCatalog.names, "images_found": found}
    (out.parent / "seen.json").write_text(json.dumps(seen))
    records = [{"iteration": 19, "total_loss": 2.0}, json.loads(os.environ.get("FAKE_METRICS", "{}"))]
    with (out / "metrics.json").open("a") as handle:  # detectron2 appends
        handle.write("".join(json.dumps(r) + "\\n" for r in records))
"""
METRICS = {"iteration": 99, "bbox/AP": 40.5, "bbox/AP50": 61.0, "segm/AP": 36.25, "segm/AP50": 58.0}


@pytest.fixture
def detectron2_env(tmp_path, monkeypatch):
    """The stand-in detectron2 on the launcher's path; its train script; the backend options."""
    for name, text in FAKE_DETECTRON2.items():
        (tmp_path / "fake" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "fake" / name).write_text(text)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fake"))
    monkeypatch.setenv("FAKE_METRICS", json.dumps(METRICS))
    script = tmp_path / "lazyconfig_train_net.py"
    script.write_text(FAKE_TRAIN)
    return {
        "python": sys.executable,
        "train_script": str(script),
        "config_file": "projects/ViTDet/configs/COCO/mask_rcnn_vitdet_b_100ep.py",
        "gpus": 8,
        "overrides": ["train.max_iter=100"],
    }


def mae_checkpoint(path: Path, patch_size: int = 16) -> Path:
    torch.manual_seed(0)
    save_mae(MaskedAutoencoder(MAESettings("pico", image_size=32, patch_size=patch_size)), path, {})
    return path


def standin_files(folder: Path) -> dict:
    for split in ("train", "val"):
        write_split(CocoStandIn(images=3, image_size=32), split, folder)
    return coco_files({"coco": {"source": "standin"}}, str(folder))


def test_the_stand_in_is_registered_under_our_names_in_its_own_layout_with_bitmasks(tmp_path, detectron2_env):
    files = standin_files(tmp_path / "standin")
    work = tmp_path / "work"
    scores = run_vitdet(mae_checkpoint(tmp_path / "vip.pt"), files, True, detectron2_env, work)
    assert (scores["ap_box"], scores["ap_mask"], scores["ap50_box"], scores["iteration"]) == (40.5, 36.25, 61.0, 99)
    seen = json.loads((work / "seen.json").read_text())
    assert {name: (entry["json"], entry["image_root"]) for name, entry in seen["registered"].items()} == {
        "dpvip_coco_train": (str(tmp_path / "standin/train.json"), str(tmp_path / "standin")),
        "dpvip_coco_val": (str(tmp_path / "standin/val.json"), str(tmp_path / "standin")),
    }
    assert seen["images_found"] == {"dpvip_coco_train": True, "dpvip_coco_val": True}
    assert (seen["config_file"], seen["gpus"]) == (detectron2_env["config_file"], 8)
    opts = seen["opts"]
    for expected in (
        f"train.init_checkpoint={work / 'vitdet_init.pth'}",
        "dataloader.train.dataset.names=dpvip_coco_train",
        "dataloader.test.dataset.names=dpvip_coco_val",
        "dataloader.evaluator.dataset_name=dpvip_coco_val",
        "dataloader.train.mapper.instance_mask_format=bitmask",
        "model.roi_heads.num_classes=3",  # circle, square, triangle: not COCO's 80
        "model.backbone.net.pretrain_img_size=32",
        "train.max_iter=100",
    ):
        assert expected in opts, expected
    assert opts[-1] == "train.max_iter=100"  # the user's overrides come last, so they win
    assert "backbone.net.pos_embed" in torch.load(work / "vitdet_init.pth")["model"]


def test_coco_2017_is_registered_from_its_own_layout_with_polygons(tmp_path, detectron2_env):
    root = tmp_path / "mscoco"  # any folder name: nothing looks for <DETECTRON2_DATASETS>/coco
    files = coco_files({"coco": {"source": "coco", "root": str(root)}}, None)
    (root / "annotations").mkdir(parents=True)
    for split in ("train", "val"):
        (root / f"{split}2017").mkdir()
        (root / f"{split}2017" / "1.jpg").write_bytes(b"")
        record = {"images": [{"id": 1, "file_name": "1.jpg"}], "categories": [{"id": i} for i in range(1, 81)]}
        (root / "annotations" / f"instances_{split}2017.json").write_text(json.dumps(record))
    work = tmp_path / "work"
    run_vitdet(mae_checkpoint(tmp_path / "vip.pt"), files, False, detectron2_env, work)
    seen = json.loads((work / "seen.json").read_text())
    assert seen["registered"]["dpvip_coco_train"]["json"] == str(root / "annotations/instances_train2017.json")
    assert seen["registered"]["dpvip_coco_val"]["image_root"] == str(root / "val2017")
    assert seen["images_found"] == {"dpvip_coco_train": True, "dpvip_coco_val": True}
    assert "model.roi_heads.num_classes=80" in seen["opts"]
    assert not any("instance_mask_format" in opt for opt in seen["opts"])


def test_the_coco_job_hands_the_stand_in_to_detectron2_not_evaluate_coco_root(tmp_path, monkeypatch):
    """source: standin with backend detectron2 reads the stand-in, never /datasets/coco."""
    from dpvip.evaluate import detectron2_run, jobs

    passed = {}

    def fake_run(checkpoint, files, standin, options, work, score_threshold):
        passed.update(files=files, standin=standin, score_threshold=score_threshold)
        return final_scores(metrics) | {"command": [], "train_images": 5, "val_images": 2}

    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"iteration": 3, "bbox/AP": float("nan"), "segm/AP": float("nan")}) + "\n")
    monkeypatch.setattr(detectron2_run, "run_vitdet", fake_run)
    section = {
        "coco": {
            "source": "standin",
            "root": "/datasets/coco",
            "backend": "detectron2",
            "detectron2": {},
            "score_threshold": 0.05,
        }
    }
    evaluation = jobs.Evaluation("coco", "vip_pico")
    standin = str(tmp_path / "sd")
    write_split(CocoStandIn(images=2), "val", standin)
    result = jobs._coco(
        evaluation, section, "vip.pt", {"out": str(tmp_path / "r.json"), "standin": standin}, SimpleNamespace(dist=None)
    )
    assert passed == {"files": coco_files(section, standin), "standin": True, "score_threshold": 0.05}
    assert result["columns"] == {"COCO AP box": None, "COCO AP mask": None}
    assert (result["data"]["train"], result["data"]["test"]) == (5, 2)  # the table's "? train / ? test" before
    assert "detectron2 reported NaN for bbox/AP, segm/AP" in result["data"]["undefined"]
    # the trivial detector is scored on the same validation set, whichever backend ran
    assert result["trivial"]["columns"] == whole_image_scores_of(Path(standin) / "val.json")


def whole_image_scores_of(val_json) -> dict:
    scores = whole_image_scores(val_json)
    return {"COCO AP box": scores["ap_box"], "COCO AP mask": scores["ap_mask"]}


def test_nan_ap_is_reported_as_undefined_not_passed_on(tmp_path):
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"iteration": 3, "bbox/AP": float("nan"), "segm/AP": 12.5}) + "\n")
    scores = final_scores(metrics)
    assert (scores["ap_box"], scores["ap_mask"]) == (None, 12.5)
    assert scores["undefined"].startswith("detectron2 reported NaN for bbox/AP: no detection above the score")


def test_a_failed_detectron2_run_points_at_its_log(tmp_path, detectron2_env):
    (tmp_path / "lazyconfig_train_net.py").write_text("import sys; print('CUDA error'); sys.exit(3)")
    files = standin_files(tmp_path / "standin")
    with pytest.raises(DpvipInputError, match="detectron2 ViTDet exited with 3; see .*detectron2.log"):
        run_vitdet(mae_checkpoint(tmp_path / "vip.pt"), files, True, detectron2_env, tmp_path / "work")
    assert "CUDA error" in (tmp_path / "work" / "detectron2.log").read_text()


def test_missing_settings_and_a_patch_size_vitdet_cannot_use_are_refused(tmp_path, detectron2_env):
    files = standin_files(tmp_path / "standin")
    with pytest.raises(DpvipInputError, match="evaluate.coco.detectron2.train_script is not set"):
        run_vitdet(tmp_path / "vip.pt", files, True, detectron2_env | {"train_script": None}, tmp_path / "work")
    with pytest.raises(DpvipInputError, match="needs an encoder of patch size 16 .* this checkpoint's is 4"):
        run_vitdet(mae_checkpoint(tmp_path / "vip4.pt", 4), files, True, detectron2_env, tmp_path / "work")


def test_metrics_without_an_evaluation_are_refused(tmp_path):
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"iteration": 5, "total_loss": 1.0}) + "\n")
    with pytest.raises(DpvipInputError, match="holds no COCO evaluation"):
        final_scores(metrics)


def test_the_launcher_needs_nothing_but_detectron2_and_the_standard_library():
    from dpvip.evaluate import detectron2_run

    source = detectron2_run.LAUNCHER.read_text()
    imports = {
        line.split()[1].split(".")[0] for line in source.splitlines() if line.strip().startswith(("import ", "from "))
    }
    assert imports == {"importlib", "json", "os", "sys", "detectron2"}


def test_the_run_scores_both_tasks_resumes_passes_the_threshold_and_counts_the_images(tmp_path, detectron2_env):
    """The evaluator's tasks are given (left to infer them, it scores bbox only when nothing
    is detected, and the job failed); `--resume`; evaluate.coco.score_threshold reaches the box
    predictor; the result has the image counts; the output folder (model_final.pth) is gone."""
    files = standin_files(tmp_path / "standin")
    work = tmp_path / "work"
    scores = run_vitdet(mae_checkpoint(tmp_path / "vip.pt"), files, True, detectron2_env, work, 0.0)
    seen = json.loads((work / "seen.json").read_text())
    assert seen["resume"] and "dataloader.evaluator.tasks=[bbox,segm]" in seen["opts"]
    assert "model.roi_heads.box_predictor.test_score_thresh=0.0" in seen["opts"]
    assert (scores["train_images"], scores["val_images"]) == (3, 3)
    assert not (work / "output").exists()


def test_only_this_runs_records_are_read_and_another_commands_output_is_cleared(tmp_path, detectron2_env, monkeypatch):
    """metrics.json is appended to: an older run's evaluation must not become this run's AP."""
    files = standin_files(tmp_path / "standin")
    work, checkpoint = tmp_path / "work", mae_checkpoint(tmp_path / "vip.pt")
    stale = {"iteration": 99, "bbox/AP": 77.0, "segm/AP": 66.0}
    monkeypatch.setenv("FAKE_METRICS", json.dumps({"iteration": 99, "total_loss": 1.0}))  # this run evaluates nothing
    output = work / "output"
    output.mkdir(parents=True)
    (output / "metrics.json").write_text(json.dumps(stale) + "\n")
    (output / "last_checkpoint").write_text("model_0000099.pth")
    with pytest.raises(DpvipInputError, match="holds no COCO evaluation .* from this run"):
        run_vitdet(checkpoint, files, True, detectron2_env, work)
    # another command's folder (no stamp, or another) was cleared before the run: its stale
    # checkpoint is not resumed from
    assert not (output / "last_checkpoint").exists()
    # an interrupted run of the same command keeps its folder for --resume, and its old
    # records are still not read as this run's
    (output / "metrics.json").write_text(json.dumps(stale) + "\n")
    (output / "last_checkpoint").write_text("model_0000099.pth")
    monkeypatch.setenv("FAKE_METRICS", json.dumps(METRICS))
    scores = run_vitdet(checkpoint, files, True, detectron2_env, work)
    assert scores["ap_box"] == 40.5 and not output.exists()
