"""Resumable evaluations: a loop killed by SIGTERM at a chosen step saves its state and a rerun
ends exactly where an uninterrupted run ends (torch.equal on every weight and buffer, on
CPU): the linear probe (features cached, and augmented), few-shot fine-tuning of a ViT and of
a CNN, and DP fine-tuning (with its ledger). A grid search keeps the points it finished; a
whole job, killed and rerun, writes the result an uninterrupted job writes."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import replace

import pytest
import torch

from conftest import share_key
from dpvip.errors import DpvipInputError
from dpvip.evaluate import finetune as finetune_module
from dpvip.evaluate.cnn_baselines import CNN_FINETUNE, cnn_finetune
from dpvip.evaluate.datasets import digits
from dpvip.evaluate.dp_finetune import DPFinetuneSettings, train_dp_classifier
from dpvip.privacy.randomness import key_path
from dpvip.evaluate.features import FeatureChoice
from dpvip.evaluate.finetune import FinetuneSettings, finetune, finetune_grid
from dpvip.evaluate.jobs import run_evaluation
from dpvip.evaluate.linear_probe import ProbeSettings, probe_grid, train_probe, train_probe_augmented
from dpvip.evaluate.resumable import ShuffledEpochs
from dpvip.files import private_work_dir
from dpvip.models import MAESettings
from dpvip.models.checkpoint import save_mae
from dpvip.models.mae import MaskedAutoencoder
from dpvip.plan.vip_evaluations import Evaluation
from dpvip.selection import TEST
from dpvip.train.resume import JobState, LoopState

pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture
def sigterm_at(monkeypatch):
    """`sigterm_at(n)`: SIGTERM reaches this process just before the n-th step of the loops
    that follow is saved (counting every loop's steps from 1)."""
    calls = {"count": 0, "at": None}
    after_step = LoopState.after_step

    def kill_then_after_step(self, step, state, last=False):
        calls["count"] += 1
        if calls["count"] == calls["at"]:
            os.kill(os.getpid(), signal.SIGTERM)
        return after_step(self, step, state, last)

    monkeypatch.setattr(LoopState, "after_step", kill_then_after_step)
    return lambda at: calls.update(count=0, at=at)


@pytest.fixture(scope="module")
def digits8():
    train, test = digits(8)
    return train.subset(range(200)), test.subset(range(60))


def pico() -> MaskedAutoencoder:
    torch.manual_seed(0)
    return MaskedAutoencoder(MAESettings("pico", image_size=8, patch_size=4))


def assert_same_weights(resumed: torch.nn.Module, whole: torch.nn.Module) -> None:
    resumed, whole = resumed.state_dict(), whole.state_dict()
    assert resumed.keys() == whole.keys()
    assert all(torch.equal(resumed[key], whole[key]) for key in whole), [
        key for key in whole if not torch.equal(resumed[key], whole[key])
    ]


def killed_then_resumed(sigterm_at, at: int, run, state_file):
    """Run `run()` with SIGTERM before step `at`'s save (it must stop there, its state saved
    at that step), then again without: the resumed result."""
    sigterm_at(at)
    with pytest.raises(SystemExit, match=f"stopped by SIGTERM after step {at}"):
        run()
    assert torch.load(state_file, weights_only=True)["step"] == at
    sigterm_at(None)
    return run()


def test_shuffled_epochs_resumed_mid_epoch_continue_the_same_order():
    whole = list(ShuffledEpochs(10, 4, 3, torch.Generator().manual_seed(5), drop_last=False))
    assert [step for step, _ in whole] == list(range(9))  # 3 batches an epoch, the last of 2
    for done in (2, 3, 4, 8):  # mid-epoch, at an epoch's end, right after one, the last step
        generator = torch.Generator().manual_seed(5)
        first = ShuffledEpochs(10, 4, 3, generator, drop_last=False)
        for step, _ in first:
            if step + 1 == done:
                state = first.state(done) | {"step": done}
                break
        generator.manual_seed(123)  # the rerun's generator starts anywhere: the state sets it
        resumed = ShuffledEpochs(10, 4, 3, generator, drop_last=False)
        resumed.restore(state)
        rest = list(resumed)
        assert [step for step, _ in rest] == list(range(done, 9))
        assert all(torch.equal(a, b) for (_, a), (_, b) in zip(rest, whole[done:]))


def test_a_probe_on_cached_features_resumes_mid_epoch_to_the_same_weights(tmp_path, sigterm_at, digits8):
    features = torch.randn(200, 16, generator=torch.Generator().manual_seed(1))
    labels = digits8[0].labels
    settings = ProbeSettings(epochs=4, warmup_epochs=1, batch_size=64, blr=1.0)  # 3 steps an epoch
    whole = train_probe(features, labels, 10, settings)
    job = JobState(tmp_path, every=4)
    run = lambda: train_probe(features, labels, 10, settings, job.loop("probe", {}))  # noqa: E731
    resumed = killed_then_resumed(sigterm_at, 7, run, tmp_path / "loop_probe.pt")
    assert_same_weights(resumed, whole)
    assert not resumed.training


def test_an_augmented_probe_resumes_to_the_same_weights(tmp_path, sigterm_at, digits8):
    train = digits8[0].subset(range(96))
    settings = ProbeSettings(epochs=2, warmup_epochs=1, batch_size=32, blr=1.0, augment=True)
    whole = train_probe_augmented(pico(), FeatureChoice(), train, settings)
    run = lambda: train_probe_augmented(  # noqa: E731
        pico(), FeatureChoice(), train, settings, JobState(tmp_path, every=2).loop("probe", {})
    )
    assert_same_weights(killed_then_resumed(sigterm_at, 5, run, tmp_path / "loop_probe.pt"), whole)


def test_vit_fine_tuning_with_auto_augment_resumes_to_the_same_weights(tmp_path, sigterm_at, digits8):
    train = digits8[0].subset(range(40))
    settings = FinetuneSettings(epochs=2, warmup_epochs=1, batch_size=16, lr=1e-3, auto_augment=True)  # 3 an epoch
    whole = finetune(pico(), train, settings)
    run = lambda: finetune(pico(), train, settings, JobState(tmp_path, every=2).loop("ft", {}))  # noqa: E731
    assert_same_weights(killed_then_resumed(sigterm_at, 4, run, tmp_path / "loop_ft.pt"), whole)


def test_cnn_fine_tuning_resumes_to_the_same_weights_and_batch_norm_statistics(tmp_path, sigterm_at):
    train = digits(32)[0].subset(range(12))
    settings = replace(CNN_FINETUNE, epochs=2, warmup_epochs=1, batch_size=8, auto_augment=False)  # 2 an epoch
    whole = cnn_finetune("resnet50", None, train, settings)
    run = lambda: cnn_finetune("resnet50", None, train, settings, JobState(tmp_path).loop("cnn", {}))  # noqa: E731
    resumed = killed_then_resumed(sigterm_at, 3, run, tmp_path / "loop_cnn.pt")
    assert_same_weights(resumed, whole)
    assert int(resumed.bn1.num_batches_tracked) == 4


def test_dp_fine_tuning_resumes_to_the_same_weights_and_ledger(tmp_path, sigterm_at, digits8):
    """Secret randomness: the run's key stays in its work folder, so the rerun draws the
    same batches and noise."""
    train = digits8[0]
    settings = DPFinetuneSettings(batch_size=50, noise_multiplier=1.0, steps=6, lr=1e-2, warmup_steps=2, micro_batch=32)
    job = JobState(tmp_path, every=2)
    whole, whole_record = train_dp_classifier(pico(), train, settings, job, progress=False)
    job.clear_loop("dp_finetune")  # the state after step 4: what dp_finetune clears once it has a score
    run = lambda: train_dp_classifier(pico(), train, settings, job, progress=False)  # noqa: E731
    resumed, record = killed_then_resumed(sigterm_at, 3, run, tmp_path / "loop_dp_finetune.pt")
    assert_same_weights(resumed, whole)
    assert record == whole_record
    assert record["privacy"]["steps_done"] == 6 and key_path(tmp_path).exists()  # dp_finetune releases it


def test_dp_fine_tuning_refuses_a_state_of_another_mechanism_naming_it(tmp_path, sigterm_at, digits8):
    """Rerun with another noise multiplier, the state differs in its fingerprint too (the
    settings); the ledger is checked first, so the refusal names the mechanism's change."""
    settings = DPFinetuneSettings(batch_size=50, noise_multiplier=1.0, steps=6, lr=1e-2, micro_batch=32)
    job = JobState(tmp_path, every=2)
    run = lambda settings: train_dp_classifier(pico(), digits8[0], settings, job, progress=False)  # noqa: E731
    sigterm_at(3)
    with pytest.raises(SystemExit, match="stopped by SIGTERM after step 3"):
        run(settings)
    sigterm_at(None)
    with pytest.raises(DpvipInputError, match="trained with noise_multiplier 1.0, not 2.0: resuming with another"):
        run(replace(settings, noise_multiplier=2.0))


def test_a_grid_keeps_its_finished_points_and_resumes_the_next(tmp_path, sigterm_at, monkeypatch, digits8):
    """Two lrs of 6 steps: killed at step 4 of the second lr, the rerun trains the second
    only, from step 4, and reports what an uninterrupted grid reports."""
    train, test = digits8[0].subset(range(40)), digits8[1]
    settings = FinetuneSettings(epochs=2, warmup_epochs=1, batch_size=16, lr=1e-3, auto_augment=False)
    whole = finetune_grid(pico(), train, test, settings, [1e-3, 1e-2])
    trained = []
    original = finetune_module.finetune
    monkeypatch.setattr(
        finetune_module, "finetune", lambda mae, data, s, saved: trained.append(s.lr) or original(mae, data, s, saved)
    )
    job = JobState(tmp_path, {"model": "pico"}, every=2)
    run = lambda: finetune_grid(pico(), train, test, settings, [1e-3, 1e-2], job)  # noqa: E731
    sigterm_at(6 + 4)
    with pytest.raises(SystemExit, match="after step 4"):
        run()
    assert trained == [1e-3, 1e-2]
    assert [point[0] for point in json.loads((tmp_path / "grid_lr.json").read_text())["points"]] == [1e-3]
    sigterm_at(None)
    assert run() == whole
    assert trained == [1e-3, 1e-2, 1e-2]
    assert sorted(path.name for path in tmp_path.iterdir()) == []  # states and points forgotten with the result


def test_a_grid_of_other_settings_is_refused_by_the_key_that_differs(tmp_path, sigterm_at):
    features = torch.randn(64, 8, generator=torch.Generator().manual_seed(2))
    labels = torch.arange(64) % 4
    data = (features, labels)
    settings = ProbeSettings(epochs=3, warmup_epochs=0, batch_size=32, blr=1.0)
    job = JobState(tmp_path, every=1)
    sigterm_at(6 + 1)  # killed at the second blr's first step: the first is done
    with pytest.raises(SystemExit):
        probe_grid(data, data, 4, settings, [1.0, 2.0], job, TEST)
    sigterm_at(None)
    with pytest.raises(DpvipInputError, match=r"grid_blr.json belongs to a run with settings.epochs 3 \(now 4\)"):
        probe_grid(data, data, 4, replace(settings, epochs=4), [1.0, 2.0], job, TEST)


FEATURES = {"pooling": "mean", "last_blocks": 1, "final_norm": True}
DIGITS = {"ImageNet-1K": {"source": "digits", "test_fraction": 0.2, "seed": 0}}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("mae") / "model.pt"
    save_mae(MaskedAutoencoder(MAESettings("pico", image_size=8, patch_size=4)), path, {})
    return str(path)


def without_seconds(path) -> dict:
    record = json.loads(path.read_text())
    assert record.pop("seconds") >= 0
    return record


@pytest.mark.parametrize(
    "evaluation, options, kill_at",
    [
        (  # 5 steps a blr; killed in the second blr
            Evaluation("linear_probe", "vip_pico", "ImageNet-1K"),
            {"epochs": 5, "warmup_epochs": 1, "batch_size": 1024, "blrs": [16.0, 1.0], "weight_decay": 0.0}
            | {"augment": False, "seed": 0, "features": FEATURES, "checkpoint_every": 2},
            5 + 3,
        ),
        (
            Evaluation("dp_finetune", "vip_pico", "ImageNet-1K"),
            {"dataset": "ImageNet-1K", "batch_size": 256, "noise_multiplier": 1.0, "steps": 5, "lr": 1e-2}
            | {"warmup_steps": 1, "clip_norm": 1.0, "micro_batch": 256, "features": FEATURES, "checkpoint_every": 2},
            3,
        ),
    ],
    ids=["linear_probe", "dp_finetune"],
)
def test_a_killed_job_resumes_to_the_result_of_an_uninterrupted_one(
    tmp_path, sigterm_at, checkpoint, evaluation, options, kill_at, keep_keys
):
    section = {"image_size": 8, "datasets": DIGITS, evaluation.task: options}
    whole, resumed = tmp_path / "whole" / "result.json", tmp_path / "resumed" / "result.json"
    run_evaluation(evaluation, section, checkpoint, whole)
    if evaluation.task == "dp_finetune":  # the same secret: the same batches and noise
        share_key(private_work_dir(whole), private_work_dir(resumed))
    sigterm_at(kill_at)
    with pytest.raises(SystemExit, match="stopped by SIGTERM"):
        run_evaluation(evaluation, section, checkpoint, resumed)
    assert not resumed.exists() and any(private_work_dir(resumed).glob("loop_*.pt"))
    sigterm_at(None)
    run_evaluation(evaluation, section, checkpoint, resumed)
    assert without_seconds(resumed) == without_seconds(whole)
    assert not any(private_work_dir(resumed).glob("loop_*")) and not any(private_work_dir(resumed).glob("grid_*"))
    # a state belongs to its checkpoint: another one is refused, not resumed
    sigterm_at(kill_at)
    with pytest.raises(SystemExit):
        run_evaluation(evaluation, section, checkpoint, resumed)
    sigterm_at(None)
    other = tmp_path / "other.pt"
    torch.manual_seed(1)
    save_mae(MaskedAutoencoder(MAESettings("pico", image_size=8, patch_size=4)), other, {})
    with pytest.raises(DpvipInputError, match="belongs to a run with job.checkpoint"):
        run_evaluation(evaluation, section, str(other), resumed)
