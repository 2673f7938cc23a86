"""Constructed DP transfer study results for the report tests (a helper module, not a conftest:
a second conftest.py would replace the `conftest` module that tests import from): every run a
plan asks for, with an accuracy, a privacy record, the timing fields of a head run, and the
summaries of the feature caches the runs read."""

from __future__ import annotations

from collections.abc import Callable

from conftest import ROOT, merged_config

from dpvip.plan.transfer import TransferPlan
from dpvip.report.common.paper_values import load_paper_values

# Classes, test and train examples of each cache's data: photos (photo crops) is the embedded stand-in.
DATA = {"photos": (11, 1650, 4400), "digits": (10, 360, 1437), "ImageNet-1k": (1000, 50000, 1281167)}
DATA |= {"CIFAR-10": (10, 10000, 50000)}
DATA |= {"CIFAR-100": (100, 10000, 50000)}
WIDTH = 64
STEP_SECONDS, THREADS = 0.01, 2  # every head run: 0.01 s per step on 2 threads


def default_accuracy(run) -> float:
    """40 + 10 lr + seed: well above every chance level, the larger learning rate the better."""
    return 40.0 + 10 * run.settings["lr"] + run.settings["seed"]


def _head_privacy(s: dict) -> dict | None:
    if s["epsilon"] is None:
        return None
    return {
        "accountant": s["accountant"],
        "sample_rate": s["batch_fraction"],
        "noise_multiplier": 3.0 / s["epsilon"],
        "planned_steps": 12,
        "epsilon_spent": s["epsilon"],
        "delta": s["delta"],
    }


def _probe_privacy(s: dict) -> dict | None:
    if s["epsilon"] is None:
        return None
    return {
        "sigma_mean": 2.0 if s["sigma_ratio"] else None,
        "sigma_sgd": 40.0,
        "steps": s["steps"],
        "epsilon": s["epsilon"],
        "delta": s["delta"],
        "mu": 0.3,
    }


def head_steps(settings: dict) -> int:
    """HeadSettings.steps: max(1, round(epochs / q))."""
    return max(1, round(settings["epochs"] / settings["batch_fraction"]))


def fake_study(
    plan: TransferPlan,
    study: str,
    accuracy: Callable = default_accuracy,
    timed: bool = True,
    step_seconds: float = STEP_SECONDS,
    validation: Callable = default_accuracy,
) -> dict:
    """The result file of `study` under `plan`, each head step taking `step_seconds`;
    `timed=False` leaves out the fields head runs record since Table 10 (train_seconds,
    threads, device), as older results do. A head that held out a validation share (the
    plan's default selection) records `validation(run)` as its validation accuracy."""
    runs = []
    for run in plan.runs(study):
        s = run.settings
        if run.kind == "head":
            steps = head_steps(s)
            result = {"privacy": _head_privacy(s), "steps": steps, "seconds": step_seconds * steps + 1.0}
            if timed:
                result |= {"train_seconds": step_seconds * steps, "threads": THREADS, "device": "cpu"}
            if "validation" in s:
                result |= {"validation_accuracy": validation(run), "validation_examples": 144}
        else:
            result = {"privacy": _probe_privacy(s)}
        runs.append(run.record() | {"result": result | {"accuracy": accuracy(run)}})
    features = {
        f.path: dict(zip(("classes", "test", "train"), DATA[f.dataset])) | {"width": WIDTH, "views": f.views}
        for f in plan.study_features(study)
    }
    selection = plan.selection_record(study)
    return {"study": study, "runs": runs, "features": features, "seconds": 1.0} | (
        {"selection": selection} if selection else {}
    )


# The embedded default's studies, and the papers' printed values.
VALUES = load_paper_values(ROOT / "config" / "paper_values")
EMBEDDED = merged_config("config.yaml")["dp_transfer"]
PLAN = TransferPlan(EMBEDDED)


def fake(study: str, **options) -> dict:
    """`fake_study` of the embedded default's plan."""
    return fake_study(PLAN, study, **options)


def validation_favours_small_rates(run) -> float:
    """Validation accuracy 60 - 10 lr + seed: the smaller learning rate is best on validation,
    while the test accuracy (40 + 10 lr + seed) favours the larger."""
    return 60.0 - 10 * run.settings["lr"] + run.settings["seed"]


def with_ledgers(results: dict) -> dict:
    """The fake privacy records completed as a ledger's (what the grid notes compose)."""
    for run in results["runs"]:
        if run["result"]["privacy"]:
            run["result"]["privacy"] |= {"randomness": "seeded", "private": False, "steps_done": 12}
    return results


PAPER_PRACTICE = TransferPlan(EMBEDDED | {"mehta": EMBEDDED["mehta"] | {"selection": {"mode": "test"}}})
CELL = ("ViT-B/16 / Last layer", "With privacy / batch=2^20")
