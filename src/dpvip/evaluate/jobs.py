"""One evaluation job of the workflow: a task on a backbone, its result as a small JSON file.

Every result holds `columns` ({table column: value in percent, or epsilon/delta}), which the
ViP tables read, beside what produced it: the task's settings, the data (and the stand-in,
if one), the grid of hyperparameters tried, and the wall time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import torch

from dpvip.evaluate.datasets import labelled_split
from dpvip.evaluate.features import FeatureChoice, extract
from dpvip.evaluate.kshot import k_shot_indices
from dpvip.evaluate.linear_probe import ProbeSettings, best_of_grid, probe_grid, top1_accuracy, train_probe_augmented
from dpvip.plan.vip_evaluations import Evaluation
from dpvip.files import private_work_dir, write_json
from dpvip.models.checkpoint import load_mae_at


def _device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _probe(evaluation: Evaluation, section: dict, checkpoint: str | None, paths: dict) -> dict:
    options = section["linear_probe"]
    mae, _ = load_mae_at(checkpoint, section["image_size"], _device())
    train, test, data = labelled_split(
        evaluation.dataset, section["datasets"][evaluation.dataset], section["image_size"]
    )
    choice = FeatureChoice(**options["features"])
    settings = ProbeSettings(
        **{key: options[key] for key in ("epochs", "warmup_epochs", "batch_size", "weight_decay", "augment", "seed")}
    )
    test_features = extract(mae, test, choice)
    if settings.augment:  # every batch through the encoder again
        probe_of = lambda blr: train_probe_augmented(mae, choice, train, replace(settings, blr=blr))  # noqa: E731
        grid = best_of_grid(
            lambda blr: top1_accuracy(probe_of(blr), test_features, test.labels), options["blrs"], "blr"
        )
    else:
        grid = probe_grid(
            (extract(mae, train, choice), train.labels),
            (test_features, test.labels),
            train.classes,
            settings,
            options["blrs"],
        )
    return {
        "columns": {evaluation.dataset: 100 * grid["accuracy"]},
        "grid": grid,
        "settings": asdict(settings)
        | {
            "features": asdict(choice),
            "augmentation": "RandomResizedCrop + flip" if settings.augment else "none: features computed once",
        },
        "data": data,
    }


def _few_shot(evaluation: Evaluation, section: dict, checkpoint: str | None, paths: dict) -> dict:
    from dpvip.evaluate.finetune import FinetuneSettings, finetune_grid

    options = section["few_shot"]
    image_size = section["image_size"]
    if evaluation.is_cnn:  # AlexNet needs at least 63 px: a CNN may see other sizes than the ViTs
        arch = evaluation.backbone.removeprefix("cnn_")
        image_size = next(b["image_size"] for b in options["baselines"].values() if b["arch"] == arch) or image_size
    train, test, data = labelled_split(evaluation.dataset, section["datasets"][evaluation.dataset], image_size)
    chosen = train.subset(k_shot_indices(train.labels.numpy(), evaluation.shots, options["seed"]))
    column = f"{evaluation.dataset} {evaluation.shots}-shot"
    common = {
        "epochs": options["epochs"],
        "warmup_epochs": options["warmup_epochs"],
        "batch_size": options["batch_size"],
        "auto_augment": options["auto_augment"],
        "seed": options["seed"],
    }
    if evaluation.is_cnn:
        from dpvip.evaluate.cnn_baselines import cnn_finetune_grid

        settings = FinetuneSettings(**common, weight_decay=0.0)
        grid = cnn_finetune_grid(arch, checkpoint, chosen, test, settings, options["cnn_lrs"])
    else:
        mae, _ = load_mae_at(checkpoint, section["image_size"], _device())
        settings = FinetuneSettings(
            **common, weight_decay=options["weight_decay"], features=FeatureChoice(**options["features"])
        )
        grid = finetune_grid(mae, chosen, test, settings, options["lrs"])
    return {
        "columns": {column: 100 * grid["accuracy"]},
        "grid": grid,
        "settings": asdict(settings),
        "data": data | {"shots": evaluation.shots, "train": len(chosen), "image_size": image_size},
    }


def _dp_finetune(evaluation: Evaluation, section: dict, checkpoint: str | None, paths: dict) -> dict:
    from dpvip.evaluate.dp_finetune import DPFinetuneSettings, dp_finetune

    options = dict(section["dp_finetune"])
    options.pop("dataset")
    settings = DPFinetuneSettings(**options | {"features": FeatureChoice(**options["features"])})
    mae, _ = load_mae_at(checkpoint, section["image_size"], _device())
    train, test, data = labelled_split(
        evaluation.dataset, section["datasets"][evaluation.dataset], section["image_size"]
    )
    result = dp_finetune(mae, train, test, settings, private_work_dir(paths["out"]))
    privacy = result["privacy"]
    columns = {"Top-1 Accuracy": result["top1_percent"], "epsilon": privacy["epsilon_spent"], "delta": privacy["delta"]}
    return {"columns": columns, "data": data} | {
        key: result[key] for key in ("privacy", "batch_sizes", "clipped_fraction", "settings")
    }


def shapes_spec(section: dict, image_size: int):
    """The generated shapes set that stands in for COCO and ADE20K, at a task's image size."""
    from dpvip.evaluate.coco_standin import CocoStandIn

    shapes = section["shapes"]
    return CocoStandIn(
        images=shapes["train_images"], image_size=image_size, max_objects=shapes["max_objects"], seed=shapes["seed"]
    )


def _ade20k(evaluation: Evaluation, section: dict, checkpoint: str | None, paths: dict) -> dict:
    from dpvip.evaluate.segmentation import SegmentationSettings, ade20k, evaluate_ade, shapes_segmentation

    options = dict(section["ade20k"])
    source, root, image_size = options.pop("source"), options.pop("root"), options.pop("image_size")
    if source == "standin":
        spec = shapes_spec(section, image_size)
        train, test = (
            shapes_segmentation(spec, "train"),
            shapes_segmentation(spec, "val", section["shapes"]["val_images"]),
        )
        data = {"stand_in": "generated shapes (4 classes: background, circle, square, triangle)"}
    else:
        train, test = ade20k(root, "training", image_size), ade20k(root, "validation", image_size)
        data = {}
    mae, _ = load_mae_at(checkpoint, None, _device())
    result = evaluate_ade(mae, train, test, SegmentationSettings(**options))
    return {
        "columns": {"ADE20K mIoU": result["miou"]},
        "data": data | {"train": len(train), "test": len(test)},
        "scores": result,
    }


COCO_SETTINGS = ("backend", "source", "root", "detectron2")  # the rest are DetectionSettings


def coco_files(section: dict, standin_folder: str | None) -> dict[str, Path]:
    """Annotation files and image roots of COCO 2017 (its own layout) or of the stand-in."""
    if section["coco"]["source"] == "standin":
        folder = Path(standin_folder)
        return {
            "train_json": folder / "train.json",
            "train_root": folder,
            "val_json": folder / "val.json",
            "val_root": folder,
        }
    root = Path(section["coco"]["root"])
    return {
        "train_json": root / "annotations" / "instances_train2017.json",
        "train_root": root / "train2017",
        "val_json": root / "annotations" / "instances_val2017.json",
        "val_root": root / "val2017",
    }


def _coco(evaluation: Evaluation, section: dict, checkpoint: str | None, paths: dict) -> dict:
    from dpvip.evaluate.detection import DetectionSettings, evaluate_coco

    options = section["coco"]
    files = coco_files(section, paths.get("standin"))
    data = (
        {"stand_in": "generated shapes (3 categories: circle, square, triangle)"}
        if options["source"] == "standin"
        else {}
    )
    if options["backend"] == "detectron2":
        from dpvip.evaluate.detectron2_run import run_vitdet

        scores = run_vitdet(
            checkpoint, options["root"], options["detectron2"], Path(paths["out"]).with_suffix(".detectron2")
        )
    else:
        settings = DetectionSettings(
            **{key: tuple(v) if key == "lr_steps" else v for key, v in options.items() if key not in COCO_SETTINGS}
        )
        mae, _ = load_mae_at(checkpoint, None, _device())
        scores = evaluate_coco(
            mae, files["train_json"], files["train_root"], files["val_json"], files["val_root"], settings
        )
        data |= {"train": scores["train_images"], "test": scores["val_images"]}
    return {
        "columns": {"COCO AP box": scores["ap_box"], "COCO AP mask": scores["ap_mask"]},
        "data": data,
        "scores": scores,
    }


RUNNERS: dict[str, Callable[[Evaluation, dict, str | None, dict], dict]] = {
    "linear_probe": _probe,
    "few_shot": _few_shot,
    "dp_finetune": _dp_finetune,
    "ade20k": _ade20k,
    "coco": _coco,
}


def run_evaluation(
    evaluation: Evaluation, section: dict, checkpoint: str | None, out: str | Path, standin: str | None = None
) -> dict:
    """Run `evaluation` with the config's `evaluate` section and write its result to `out`
    (`standin`: the folder of the generated COCO stand-in, when the task reads it)."""
    torch.manual_seed(0)
    started = time.perf_counter()
    result = RUNNERS[evaluation.task](evaluation, section, checkpoint, {"out": out, "standin": standin})
    record = {
        "evaluation": asdict(evaluation),
        "checkpoint": checkpoint,
        **result,
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_json(record, out)
    return record
