"""One DP-RandP job: a Phase I pre-training, or the private phases of one run, writing
what the tables read. Shared by the workflow scripts and `dpvip dprandp`."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from dpvip.files import private_work_dir, write_json
from dpvip.plan.data_paths import private_data_name
from dpvip.plan.dprandp_runs import Phase1Run, PrivateRun
from dpvip.plan.dprandp_private import PrivateSettings


def run_private_job(
    run: PrivateRun,
    settings: PrivateSettings,
    data_spec: dict,
    init: str | Path | None,
    out: str | Path,
    progress: bool = True,
) -> dict:
    """Phases II and III of `run`; writes its result JSON to `out` and returns it."""
    from dpvip.randp.data import private_splits
    from dpvip.randp.backbone import load_backbone
    from dpvip.randp.private import fresh_network, train_private

    splits, facts = private_splits(run.task, data_spec, settings.image_size)
    classes = splits["train"].classes
    if init is None:
        network = fresh_network(run.model, classes, settings.seed)
    else:
        network, _ = load_backbone(init, classes)
    data = private_data_name(data_spec)
    result = train_private(settings, splits, network, private_work_dir(out), init, progress, data)
    identity = dataclasses.asdict(run) | {"epsilon": None if math.isinf(run.epsilon) else run.epsilon}
    result = {"run": identity, **result, "data": facts}
    write_json(result, out)
    return result


def run_phase1_job(
    phase1: Phase1Run, section: dict, data_index: str | Path, run_dir: str | Path, progress: bool = True
) -> dict:
    """Phase I pre-training of `phase1` with the `dprandp.phase1` config section."""
    from dpvip.randp.phase1 import Phase1Settings, train_phase1

    settings = Phase1Settings.from_config(section, phase1.model, phase1.method)
    return train_phase1(settings, data_index, run_dir, progress)
