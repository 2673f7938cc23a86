"""One evaluation job of the workflow: a task on a backbone, its result as a small JSON file.

Every result holds `columns` ({table column: value in percent, or epsilon/delta}), which the
ViP tables read, beside what produced it: the task's settings, the data (and the stand-in,
if one), the grid of hyperparameters tried, and the wall time.

Jobs resume from their private work folder (`<result>.work`): the linear probe, few-shot
fine-tuning and DP fine-tuning save their loops' states there (`dpvip.train.resume.JobState`)
every `checkpoint_every` steps (a key of the task's section; CHECKPOINT_EVERY otherwise)
and on SIGTERM, and keep the grid points they finished; the states belong to the job's
checkpoint (SHA-256) and section. COCO and ADE20K keep their own states there. DP
fine-tuning, COCO and ADE20K also run as several processes (`dist`, under torchrun).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch

from dpvip.errors import DpvipInputError
from dpvip.evaluate.datasets import IndexedImages, first_per_class, labelled_split
from dpvip.evaluate.features import FeatureChoice, extract
from dpvip.plan.data_paths import private_data_name
from dpvip.evaluate.kshot import k_shot_indices
from dpvip.evaluate.linear_probe import ProbeSettings, best_of_grid, probe_grid, scores, train_probe_augmented
from dpvip.files import private_work_dir, sha256, write_json
from dpvip.per_example import PER_EXAMPLE
from dpvip.models.checkpoint import load_mae_at
from dpvip.plan.vip_evaluations import Evaluation
from dpvip.selection import Selection
from dpvip.train.resume import JobState

# Steps between saved states, by task: the probe is small (a save costs little); a few-shot
# step is short beside the save of a whole encoder and its AdamW moments; a DP step at the
# paper's B = 262,144 takes minutes.
CHECKPOINT_EVERY = {"linear_probe": 100, "few_shot": 500, "dp_finetune": 10}
# Keys of a task's section that say how the job runs, not what it computes: how often it
# saves, and its processes per node and nodes (read by rules/evaluate.smk).
LAUNCH = ("processes", "nodes")
OPERATIONAL = ("checkpoint_every", *LAUNCH)
MULTI_PROCESS = ("dp_finetune", "coco", "ade20k")  # the tasks that run as several processes


def _device(job: JobState) -> torch.device:
    if job.dist is not None:
        return job.dist.device
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _probe(evaluation: Evaluation, section: dict, checkpoint: str | None, paths: dict, job: JobState) -> dict:
    options = section["linear_probe"]
    mae, _ = load_mae_at(checkpoint, section["image_size"], _device(job))
    train, test, data = labelled_split(
        evaluation.dataset, section["datasets"][evaluation.dataset], section["image_size"]
    )
    if options.get("train_per_class"):  # a smaller training split (the embedded CPU budget)
        train = first_per_class(train, options["train_per_class"])
        data = data | {"train": len(train), "train_per_class": options["train_per_class"]}
    choice = FeatureChoice(**options["features"])
    settings = ProbeSettings(
        **{key: options[key] for key in ("epochs", "warmup_epochs", "batch_size", "weight_decay", "augment", "seed")}
    )
    selection = Selection.of(options.get("selection"))
    test_features = extract(mae, test, choice)
    if settings.augment:  # every batch through the encoder again
        fit, validation = train, None
        if selection.validating:  # held out before any probe trains; its features computed once, as test's
            kept, held = selection.split(train.labels.numpy())
            fit, held_out = IndexedImages(train, kept), IndexedImages(train, held)
            validation = (extract(mae, held_out, choice), held_out.labels)
            data = data | {"split": {"train": len(kept), "validation": len(held), "test": len(test)}}

        def accuracy_of(blr: float, saved) -> float | dict:
            probe = train_probe_augmented(mae, choice, fit, replace(settings, blr=blr), saved)
            return scores(probe, (test_features, test.labels), validation, test.name)

        grid = best_of_grid(accuracy_of, options["blrs"], "blr", job, asdict(settings), selection)
    else:
        grid = probe_grid(
            (extract(mae, train, choice), train.labels),
            (test_features, test.labels),
            train.classes,
            settings,
            options["blrs"],
            job,
            selection,
            test.name,
        )
        data = data | ({"split": grid.pop("split")} if "split" in grid else {})
    record = grid.pop(PER_EXAMPLE, None)
    return {
        "columns": {evaluation.dataset: 100 * grid["accuracy"]},
        PER_EXAMPLE: {evaluation.dataset: record},
        "grid": grid,
        "selection": grid["selection"],
        "settings": asdict(settings)
        | {
            "features": asdict(choice),
            "augmentation": "RandomResizedCrop + flip" if settings.augment else "none: features computed once",
        },
        "data": data,
    }


def _few_shot(evaluation: Evaluation, section: dict, checkpoint: str | None, paths: dict, job: JobState) -> dict:
    from dpvip.evaluate.finetune import FinetuneSettings, finetune_grid

    options = section["few_shot"]
    image_size = section["image_size"]
    if evaluation.is_cnn:  # AlexNet needs at least 63 px: a CNN may see other sizes than the ViTs
        arch = evaluation.backbone.removeprefix("cnn_")
        image_size = next(b["image_size"] for b in options["baselines"].values() if b["arch"] == arch) or image_size
    train, test, data = labelled_split(evaluation.dataset, section["datasets"][evaluation.dataset], image_size)
    shots = k_shot_indices(train.labels.numpy(), evaluation.shots, options["seed"])
    chosen, selection = train.subset(shots), Selection.of(options.get("selection"))
    validating = selection.validating and not evaluation.is_cnn  # the CNN baselines' grid picks on test
    validation = few_shot_validation(train, shots, selection, evaluation) if validating else None
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
        grid = cnn_finetune_grid(arch, checkpoint, chosen, test, settings, options["cnn_lrs"], job)
    else:
        mae, _ = load_mae_at(checkpoint, section["image_size"], _device(job))
        settings = FinetuneSettings(
            **common, weight_decay=options["weight_decay"], features=FeatureChoice(**options["features"])
        )
        grid = finetune_grid(mae, chosen, test, settings, options["lrs"], job, validation, selection)
    record = grid.pop(PER_EXAMPLE, None)
    return {
        "columns": {column: 100 * grid["accuracy"]},
        PER_EXAMPLE: {column: record},
        "grid": grid,
        "settings": asdict(settings),
        "selection": grid["selection"],
        "data": data
        | {"shots": evaluation.shots, "train": len(chosen), "image_size": image_size}
        | ({"validation": len(validation)} if validation is not None else {}),
    }


def _dp_finetune(evaluation: Evaluation, section: dict, checkpoint: str | None, paths: dict, job: JobState) -> dict:
    from dpvip.evaluate.dp_finetune import DPFinetuneSettings, dp_finetune

    options = {key: value for key, value in section["dp_finetune"].items() if key not in (*OPERATIONAL, "dataset")}
    settings = DPFinetuneSettings(**options | {"features": FeatureChoice(**options.get("features", {}))})
    mae, _ = load_mae_at(checkpoint, section["image_size"], _device(job))
    spec = section["datasets"][evaluation.dataset]
    train, test, data = labelled_split(evaluation.dataset, spec, section["image_size"])
    result = dp_finetune(mae, train, test, settings, job, progress=job.is_main, data=private_data_name(spec))
    privacy = result["privacy"]
    columns = {"Top-1 Accuracy": result["top1_percent"], "epsilon": privacy["epsilon_spent"], "delta": privacy["delta"]}
    return {"columns": columns, "data": data, PER_EXAMPLE: {"Top-1 Accuracy": result[PER_EXAMPLE]}} | {
        key: result[key] for key in ("privacy", "batch_sizes", "clipped_fraction", "settings", "world_size")
    }


def few_shot_validation(train, shots, selection: Selection, evaluation: Evaluation):
    """The validation share of the training examples the K shots left out (the shots drawn
    from the whole pool, as without validation), on which the learning rate is chosen."""
    rest = np.setdiff1d(np.arange(len(train)), shots)
    labels = train.labels.numpy()
    if set(np.unique(labels[rest])) != set(np.unique(labels)):
        raise DpvipInputError(
            f"evaluate.few_shot.selection: {evaluation.dataset}'s {evaluation.shots}-shot draw leaves a class "
            "without examples to validate on; add training images or set mode: test"
        )
    _, held = selection.split(labels[rest])
    return train.subset(rest[held])


def shapes_spec(section: dict, image_size: int):
    """The generated shapes set that stands in for COCO and ADE20K, at a task's image size."""
    from dpvip.evaluate.coco_standin import CocoStandIn

    shapes = section["shapes"]
    return CocoStandIn(
        images=shapes["train_images"], image_size=image_size, max_objects=shapes["max_objects"], seed=shapes["seed"]
    )


def _ade20k(evaluation: Evaluation, section: dict, checkpoint: str | None, paths: dict, job: JobState) -> dict:
    from dpvip.evaluate.segmentation import SegmentationSettings, evaluate_ade
    from dpvip.evaluate.segmentation_data import SHAPE_CLASSES, ade20k, shapes_segmentation

    options = {key: value for key, value in section["ade20k"].items() if key not in LAUNCH}
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
    mae, _ = load_mae_at(checkpoint, None, _device(job))
    result = evaluate_ade(
        mae, train, test, SegmentationSettings(**options), job.is_main, work_dir=job.folder, dist=job.dist
    )
    common = SHAPE_CLASSES[result["trivial"]["class"]] if source == "standin" else f"class {result['trivial']['class']}"
    return {
        "columns": {"ADE20K mIoU": result["miou"]},
        "trivial": {
            "columns": {"ADE20K mIoU": result["trivial"]["miou"]},
            "rule": f"every pixel the training split's most frequent class ({common})",
        },
        "data": data | {"train": len(train), "test": len(test)},
        "scores": result,
    }


COCO_SETTINGS = ("backend", "source", "root", "detectron2", *LAUNCH)  # the rest are DetectionSettings


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


def _coco(evaluation: Evaluation, section: dict, checkpoint: str | None, paths: dict, job: JobState) -> dict:
    from dpvip.evaluate.coco_instances import WHOLE_IMAGE, whole_image_scores
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

        if job.dist is not None and job.dist.world > 1:
            raise DpvipInputError("evaluate.coco.backend detectron2 starts its own processes: run its job as one")

        standin = options["source"] == "standin"
        scores = run_vitdet(
            checkpoint,
            files,
            standin,
            options["detectron2"],
            Path(paths["out"]).with_suffix(".detectron2"),
            options.get("score_threshold"),
        )
        data |= {"train": scores["train_images"], "test": scores["val_images"]}
        if "undefined" in scores:  # NaN AP: the cells stay empty, and the result (and table) says why
            data["undefined"] = scores["undefined"]
    else:
        settings = DetectionSettings(
            **{key: tuple(v) if key == "lr_steps" else v for key, v in options.items() if key not in COCO_SETTINGS}
        )
        mae, _ = load_mae_at(checkpoint, None, _device(job))
        scores = evaluate_coco(
            mae,
            files["train_json"],
            files["train_root"],
            files["val_json"],
            files["val_root"],
            settings,
            job.is_main,
            work_dir=job.folder,
            dist=job.dist,
        )
        data |= {"train": scores["train_images"], "test": scores["val_images"]}
    trivial = whole_image_scores(files["val_json"])
    return {
        "columns": {"COCO AP box": scores["ap_box"], "COCO AP mask": scores["ap_mask"]},
        "trivial": {
            "columns": {"COCO AP box": trivial["ap_box"], "COCO AP mask": trivial["ap_mask"]},
            "rule": WHOLE_IMAGE,
        },
        "data": data,
        "scores": scores,
    }


RUNNERS: dict[str, Callable[[Evaluation, dict, str | None, dict, JobState], dict]] = {
    "linear_probe": _probe,
    "few_shot": _few_shot,
    "dp_finetune": _dp_finetune,
    "ade20k": _ade20k,
    "coco": _coco,
}


def job_state(evaluation: Evaluation, section: dict, checkpoint: str | None, out: str | Path, dist=None) -> JobState:
    """Where the job writing `out` keeps its loops' states (its private work folder), what
    they belong to (the evaluation, its checkpoint's SHA-256 and its section without the
    keys that do not change the result) and how often they are saved."""
    options = section.get(evaluation.task, {})
    identity = {
        "evaluation": asdict(evaluation),
        "checkpoint": sha256(checkpoint) if checkpoint else None,
        "section": section | {evaluation.task: {k: v for k, v in options.items() if k not in OPERATIONAL}},
    }
    every = options.get("checkpoint_every", CHECKPOINT_EVERY.get(evaluation.task, 100))
    if not (isinstance(every, int) and every >= 1):
        raise DpvipInputError(f"evaluate.{evaluation.task}.checkpoint_every {every!r} must be a positive integer")
    return JobState(private_work_dir(out), identity, every, dist)


def run_evaluation(
    evaluation: Evaluation,
    section: dict,
    checkpoint: str | None,
    out: str | Path,
    standin: str | None = None,
    dist=None,
) -> dict:
    """Run `evaluation` with the config's `evaluate` section and write its result to `out`
    (`standin`: the folder of the generated COCO stand-in, when the task reads it). A rerun
    of an interrupted job resumes it. `dist`: the processes of a multi-process job
    (`dpvip.train.distributed.Distributed`; the tasks of MULTI_PROCESS), rank 0 writes."""
    if dist is not None and dist.world > 1 and evaluation.task not in MULTI_PROCESS:
        raise DpvipInputError(
            f"{evaluation.task} runs as one process, not {dist.world}: only {', '.join(MULTI_PROCESS)} runs as several"
        )
    torch.manual_seed(0)
    started = time.perf_counter()
    job = job_state(evaluation, section, checkpoint, out, dist)
    result = RUNNERS[evaluation.task](evaluation, section, checkpoint, {"out": out, "standin": standin}, job)
    record = {
        "evaluation": asdict(evaluation),
        "checkpoint": checkpoint,
        **result,
        "seconds": round(time.perf_counter() - started, 1),
    }
    if job.is_main:
        write_json(record, out)
    return record
