"""The users' data the configuration points at, and which of it is missing.

A dry run must succeed on a machine without the data (a cluster's login node may not mount
it), so a missing path is a warning, not an error; but the warning names the config key and
the path, so a typo shows before hours of upstream jobs instead of in the job that reads it.
Relative paths are relative to the working directory, as the jobs read them.
"""

from __future__ import annotations

import os
from pathlib import Path

from dpvip.errors import DpvipInputError

# What a labelled set of the user's needs besides its source (evaluate.datasets' format)
REQUIRED_KEYS = {"image_folder": ("train", "test"), "shards": ("train", "test", "classes")}


def private_data_name(spec: dict) -> str:
    """The name under which DP releases on a dataset compose (`dpvip.report.privacy.totals`):
    its source and where its training split is read (a folder, shards, a root), so that two
    config entries reading the same data (ViP's ImageNet and Mehta et al.'s) are one dataset.
    A stand-in generated without a location (photo crops, digits) is named by its source alone:
    releases on it compose whatever their crop settings, as they come from the same pictures."""
    source = spec.get("source", "shards")
    where = next((spec[key] for key in ("train", "root", "path", "shards") if spec.get(key)), None)
    return f"{source} {where}" if where else str(source)


def class_folders(root: str | Path) -> list[str]:
    """The class folder names of an ImageFolder tree, sorted (torchvision's order)."""
    return sorted(entry.name for entry in os.scandir(root) if entry.is_dir())


def check_labelled_sets(config: dict, workdir: str | Path = ".") -> None:
    """Refuse, before any job runs, a labelled set of the user's without a split or key its
    source needs, and an image folder whose test split has a class folder that its training
    split lacks (labels are the training split's class names: such a class has none). A test
    split that lacks some classes is allowed; its tables say so. Folders not there yet are
    left to `missing_data_paths`' warning."""
    for prefix in ("evaluate.datasets", "dp_transfer.datasets"):
        section = config.get(prefix.split(".")[0], {}).get("datasets", {})
        for name, spec in section.items():
            source = (spec or {}).get("source")
            for key in REQUIRED_KEYS.get(source, ()):
                if spec.get(key) in (None, ""):
                    raise DpvipInputError(
                        f"config key '{prefix}.{name}.{key}' is missing: source {source} needs "
                        f"{', '.join(REQUIRED_KEYS[source])}"
                    )
            if source != "image_folder":
                continue
            train, test = (Path(workdir) / spec[split] for split in ("train", "test"))
            if train.is_dir() and test.is_dir():
                unknown = sorted(set(class_folders(test)) - set(class_folders(train)))
                if unknown:
                    raise DpvipInputError(
                        f"{prefix}.{name}: the test folder {spec['test']} has class folder(s) {', '.join(unknown)} "
                        f"that the train folder {spec['train']} lacks (labels are the train folder's class names)"
                    )


def _labelled_sets(prefix: str, datasets: dict) -> list[tuple[str, str]]:
    """evaluate.datasets' format: ImageFolder trees or shard indexes for train and test."""
    return [
        (f"{prefix}.{name}.{split}", spec[split])
        for name, spec in datasets.items()
        if spec and spec.get("source") in ("image_folder", "shards")
        for split in ("train", "test")
        if spec.get(split)
    ]


def configured_data_paths(config: dict) -> list[tuple[str, str]]:
    """(config key, path) of every file or folder of the user's data that the configured
    sources read (an entry whose source is a stand-in reads none)."""
    paths: list[tuple[str, str]] = [
        (f"synthetic.datasets.{name}.path", spec.get("path"))
        for name, spec in config.get("synthetic", {}).get("datasets", {}).items()
        if spec and spec.get("family") in ("image_folder", "image_shards")
    ]
    laion = config.get("data", {}).get("laion", {})
    if laion.get("source") in ("shards", "img2dataset"):
        key = "shards" if laion["source"] == "shards" else "url_list"
        paths.append((f"data.laion.{key}", laion.get(key)))
    evaluate = config.get("evaluate", {})
    paths += _labelled_sets("evaluate.datasets", evaluate.get("datasets", {}))
    for task, source in (("coco", "coco"), ("ade20k", "ade20k")):
        if evaluate.get(task, {}).get("source") == source:
            paths.append((f"evaluate.{task}.root", evaluate[task].get("root")))
    for name, baseline in evaluate.get("few_shot", {}).get("baselines", {}).items():
        paths.append((f"evaluate.few_shot.baselines.{name}.checkpoint", (baseline or {}).get("checkpoint")))
    for task, spec in config.get("dprandp", {}).get("private", {}).get("tasks", {}).items():
        data = (spec or {}).get("data") or {}
        key = {"cifar10": "root", "cifar100": "root", "medmnist": "path"}.get(data.get("source"))
        if key:
            paths.append((f"dprandp.private.tasks.{task}.data.{key}", data.get(key)))
    transfer = config.get("dp_transfer", {})
    paths += _labelled_sets("dp_transfer.datasets", transfer.get("datasets", {}))
    for name, backbone in transfer.get("backbones", {}).items():
        if backbone and backbone.get("from") == "file":
            paths.append((f"dp_transfer.backbones.{name}.path", backbone.get("path")))
    return [(key, str(path)) for key, path in paths if path]


def missing_data_paths(config: dict, workdir: str | Path = ".") -> list[str]:
    """One line per configured data path that does not exist, naming its key."""
    return [
        f"config key '{key}': {path} does not exist (the jobs that read it will fail)"
        for key, path in configured_data_paths(config)
        if not (Path(workdir) / path).exists()
    ]
