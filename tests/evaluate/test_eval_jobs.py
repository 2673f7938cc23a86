"""One evaluation job end to end on a tiny checkpoint: its result file holds the table
columns beside what produced them (settings, data and stand-in, grid, ledger)."""

from __future__ import annotations

import json

import pytest
import torch

from dpvip.evaluate.jobs import run_evaluation
from dpvip.plan.vip_evaluations import Evaluation
from dpvip.models import MAESettings
from dpvip.models.checkpoint import save_mae
from dpvip.models.mae import MaskedAutoencoder

pytestmark = pytest.mark.usefixtures("torch_one_thread")
FEATURES = {"pooling": "mean", "last_blocks": 1, "final_norm": True}
SECTION = {
    "image_size": 16,
    "datasets": {"ImageNet-1K": {"source": "digits", "test_fraction": 0.2, "seed": 0}},
    "linear_probe": {
        "epochs": 5,
        "warmup_epochs": 1,
        "batch_size": 256,
        "blrs": [16.0, 1.0],
        "weight_decay": 0.0,
        "augment": False,
        "seed": 0,
        "features": FEATURES,
    },
    "dp_finetune": {
        "dataset": "ImageNet-1K",
        "batch_size": 512,
        "noise_multiplier": 1.0,
        "steps": 3,
        "lr": 1e-2,
        "weight_decay": 0.005,
        "warmup_steps": 1,
        "clip_norm": 1.0,
        "delta": None,
        "accountant": "rdp",
        "micro_batch": 256,
        "seed": 0,
        "features": FEATURES,
    },
}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("mae") / "model.pt"
    save_mae(MaskedAutoencoder(MAESettings("pico", image_size=32, patch_size=4)), path, {})
    return str(path)


def test_a_probe_job_writes_its_column_grid_and_stand_in(tmp_path, checkpoint):
    out = tmp_path / "probe.json"
    run_evaluation(Evaluation("linear_probe", "vip_pico", "ImageNet-1K"), SECTION, checkpoint, out)
    result = json.loads(out.read_text())
    assert result["evaluation"] == {
        "task": "linear_probe",
        "backbone": "vip_pico",
        "dataset": "ImageNet-1K",
        "shots": None,
    }
    assert result["columns"]["ImageNet-1K"] == 100 * result["grid"]["accuracy"] > 20  # chance: 10%
    assert set(result["grid"]["grid"]) == {"16.0", "1.0"}
    # the default selection: 10% of train (ceil: 144) held out, the blr chosen on it
    split = {"train": 1293, "validation": 144, "test": 360}
    assert result["data"] == {"stand_in": "scikit-learn digits", "train": 1437, "test": 360, "split": split}
    assert result["selection"] == {"mode": "validation", "fraction": 0.1, "seed": 0, "stratified": True}
    validation = result["grid"]["validation"]
    assert set(validation) == {"16.0", "1.0"} and result["grid"]["blr"] == float(max(validation, key=validation.get))
    assert result["settings"]["augmentation"] == "none: features computed once"


def test_a_probe_job_on_test_selection_keeps_the_papers_practice(tmp_path, checkpoint):
    section = SECTION | {"linear_probe": SECTION["linear_probe"] | {"selection": {"mode": "test"}}}
    out = tmp_path / "probe.json"
    run_evaluation(Evaluation("linear_probe", "vip_pico", "ImageNet-1K"), section, checkpoint, out)
    result = json.loads(out.read_text())
    grid = result["grid"]["grid"]
    assert result["grid"]["blr"] == float(max(grid, key=grid.get)) and "validation" not in result["grid"]
    assert result["selection"]["mode"] == "test" and "optimistic" in result["selection"]["label"]
    assert result["data"] == {"stand_in": "scikit-learn digits", "train": 1437, "test": 360}


def test_an_augmented_probe_job_holds_out_its_validation_images(tmp_path, checkpoint):
    options = SECTION["linear_probe"] | {"augment": True, "epochs": 1, "warmup_epochs": 0, "blrs": [1.0, 16.0]}
    section = SECTION | {"linear_probe": options | {"selection": {"mode": "validation", "fraction": 0.25}}}
    out = tmp_path / "probe.json"
    run_evaluation(Evaluation("linear_probe", "vip_pico", "ImageNet-1K"), section, checkpoint, out)
    result = json.loads(out.read_text())
    assert result["data"]["split"] == {"train": 1077, "validation": 360, "test": 360}
    validation = result["grid"]["validation"]
    assert result["grid"]["blr"] == float(max(validation, key=validation.get))
    assert result["grid"]["accuracy"] == result["grid"]["grid"][str(result["grid"]["blr"])]


def test_a_dp_finetune_job_writes_its_ledger(tmp_path, checkpoint):
    out = tmp_path / "dp.json"
    run_evaluation(Evaluation("dp_finetune", "vip_pico", "ImageNet-1K"), SECTION, checkpoint, out)
    result = json.loads(out.read_text())
    ledger = result["privacy"]
    assert ledger["steps_done"] == ledger["planned_steps"] == 3 and ledger["noise_multiplier"] == 1.0
    assert ledger["sample_rate"] == 512 / 1437 and ledger["delta"] == 1 / (2 * 1437)
    assert result["columns"] == {
        "Top-1 Accuracy": pytest.approx(result["columns"]["Top-1 Accuracy"]),
        "epsilon": ledger["epsilon_spent"],
        "delta": ledger["delta"],
    }
    # the epsilon the run records is the accountant's for its (q, sigma, steps, delta)
    from dpvip.privacy.accounting import Mechanism, epsilon

    expected = epsilon([Mechanism(512 / 1437, 1.0, 3)], ledger["delta"], "rdp").epsilon
    assert ledger["epsilon_spent"] == pytest.approx(expected, rel=1e-9)


def test_few_shot_validation_comes_from_the_examples_the_shots_left_out():
    """The K shots are drawn from the whole pool (as without validation); the learning rate's
    validation share is held out of the rest, stratified; a draw that leaves a class nothing
    to validate on is refused naming the key."""
    import numpy as np

    from dpvip.errors import DpvipInputError
    from dpvip.evaluate.datasets import digits
    from dpvip.evaluate.jobs import few_shot_validation
    from dpvip.evaluate.kshot import k_shot_indices
    from dpvip.selection import Selection

    train, _ = digits(8)
    labels = train.labels.numpy()
    shots = k_shot_indices(labels, 5, 0)
    evaluation = Evaluation("few_shot", "syn_vip_micro", "CIFAR-100", 5)
    validation = few_shot_validation(train, shots, Selection(fraction=0.1, seed=0), evaluation)
    rest = len(labels) - len(shots)
    assert len(validation) == int(np.ceil(0.1 * rest))
    shot_images = {bytes(image.numpy()) for image in train.images[shots]}
    assert not shot_images & {bytes(image.numpy()) for image in validation.images}
    assert set(np.unique(validation.labels.numpy())) == set(range(10))  # every class validates
    tiny = train.subset(np.concatenate([np.flatnonzero(labels == c)[:5] for c in range(10)]))
    with pytest.raises(DpvipInputError, match=r"evaluate.few_shot.selection: CIFAR-100's 5-shot draw leaves a class"):
        few_shot_validation(tiny, k_shot_indices(tiny.labels.numpy(), 5, 0), Selection(), evaluation)
