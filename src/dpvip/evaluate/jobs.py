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
from dpvip.evaluate.plan import Evaluation
from dpvip.files import write_json
from dpvip.models.checkpoint import load_mae_at


def _device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _probe(evaluation: Evaluation, section: dict, checkpoint: str | None) -> dict:
    options = section["linear_probe"]
    mae, _ = load_mae_at(checkpoint, section["image_size"], _device())
    train, test, data = labelled_split(evaluation.dataset, section["datasets"][evaluation.dataset], section["image_size"])
    choice = FeatureChoice(**options["features"])
    settings = ProbeSettings(**{key: options[key] for key in ("epochs", "warmup_epochs", "batch_size", "weight_decay", "augment", "seed")})
    test_features = extract(mae, test, choice)
    if settings.augment:  # every batch through the encoder again
        probe_of = lambda blr: train_probe_augmented(mae, choice, train, replace(settings, blr=blr))  # noqa: E731
        grid = best_of_grid(lambda blr: top1_accuracy(probe_of(blr), test_features, test.labels), options["blrs"], "blr")
    else:
        grid = probe_grid((extract(mae, train, choice), train.labels), (test_features, test.labels), train.classes, settings, options["blrs"])
    return {
        "columns": {evaluation.dataset: 100 * grid["accuracy"]},
        "grid": grid,
        "settings": asdict(settings) | {"features": asdict(choice), "augmentation": "RandomResizedCrop + flip" if settings.augment else "none: features computed once"},
        "data": data,
    }


def _few_shot(evaluation: Evaluation, section: dict, checkpoint: str | None) -> dict:
    from dpvip.evaluate.finetune import FinetuneSettings, finetune_grid

    options = section["few_shot"]
    # AlexNet needs at least 63 px: the CNNs may see larger images than the ViTs
    image_size = (options["cnn_image_size"] or section["image_size"]) if evaluation.is_cnn else section["image_size"]
    train, test, data = labelled_split(evaluation.dataset, section["datasets"][evaluation.dataset], image_size)
    chosen = train.subset(k_shot_indices(train.labels.numpy(), evaluation.shots, options["seed"]))
    column = f"{evaluation.dataset} {evaluation.shots}-shot"
    common = {"epochs": options["epochs"], "warmup_epochs": options["warmup_epochs"], "batch_size": options["batch_size"], "auto_augment": options["auto_augment"], "seed": options["seed"]}
    if evaluation.is_cnn:
        from dpvip.evaluate.cnn_baselines import cnn_finetune_grid

        arch = evaluation.backbone.removeprefix("cnn_")
        settings = FinetuneSettings(**common, weight_decay=0.0)
        grid = cnn_finetune_grid(arch, checkpoint, chosen, test, settings, options["cnn_lrs"])
    else:
        mae, _ = load_mae_at(checkpoint, section["image_size"], _device())
        settings = FinetuneSettings(**common, weight_decay=options["weight_decay"], features=FeatureChoice(**options["features"]))
        grid = finetune_grid(mae, chosen, test, settings, options["lrs"])
    return {"columns": {column: 100 * grid["accuracy"]}, "grid": grid, "settings": asdict(settings), "data": data | {"shots": evaluation.shots, "train": len(chosen), "image_size": image_size}}


def _dp_finetune(evaluation: Evaluation, section: dict, checkpoint: str | None) -> dict:
    from dpvip.evaluate.dp_finetune import DPFinetuneSettings, dp_finetune

    options = dict(section["dp_finetune"])
    options.pop("dataset")
    settings = DPFinetuneSettings(**options | {"features": FeatureChoice(**options["features"])})
    mae, _ = load_mae_at(checkpoint, section["image_size"], _device())
    train, test, data = labelled_split(evaluation.dataset, section["datasets"][evaluation.dataset], section["image_size"])
    result = dp_finetune(mae, train, test, settings)
    privacy = result["privacy"]
    columns = {"Top-1 Accuracy": result["top1_percent"], "epsilon": privacy["epsilon_spent"], "delta": privacy["delta"]}
    return {"columns": columns, "data": data} | {key: result[key] for key in ("privacy", "batch_sizes", "clipped_fraction", "settings")}


RUNNERS: dict[str, Callable[[Evaluation, dict, str | None], dict]] = {
    "linear_probe": _probe,
    "few_shot": _few_shot,
    "dp_finetune": _dp_finetune,
}


def run_evaluation(evaluation: Evaluation, section: dict, checkpoint: str | None, out: str | Path) -> dict:
    """Run `evaluation` with the config's `evaluate` section and write its result to `out`."""
    torch.manual_seed(0)
    started = time.perf_counter()
    result = RUNNERS[evaluation.task](evaluation, section, checkpoint)
    record = {"evaluation": asdict(evaluation), "checkpoint": checkpoint, **result, "seconds": round(time.perf_counter() - started, 1)}
    write_json(record, out)
    return record
