"""MAE pre-training: the loss falls; a run stopped by a crash or SIGTERM resumes to exactly
the weights and log of the uninterrupted run; micro-batches and DataLoader workers do not
change the result; resuming with other settings is refused by name; corrupt samples are
skipped and counted."""

from __future__ import annotations

import os
import shutil
import signal

import pytest

from dpvip.errors import DpvipInputError
from dpvip.train import checkpoint
from dpvip.train.mae_pretrain import MAEPretraining, pretrain_mae
from dpvip.plan.pretrain import PretrainSettings
from dpvip.train.metrics import read_metrics
from pretrain_data import (  # noqa: F401  (fixtures)
    SETTINGS,
    SIZE,
    STEPS,
    assert_identical,
    corrupt_index,
    crash_on_call,
    max_difference,
    one_shard_index,
    record,
    reference_run,
    shaders_index,
    single_thread,
    weights,
)

pytestmark = pytest.mark.usefixtures("single_thread")


def settings(size: str = SIZE, **changes) -> PretrainSettings:
    return PretrainSettings.from_config(SETTINGS | changes, size)


def logged(run_dir) -> list[tuple[int, float, float]]:
    """(step, loss, lr) of each record: what must not depend on how the run was carried out."""
    return [(r["step"], r["loss"], r["lr"]) for r in read_metrics(run_dir / "metrics.jsonl")]


def test_loss_falls_and_the_run_writes_model_and_metrics(reference_run):
    metrics = read_metrics(reference_run / "metrics.jsonl")
    assert [r["step"] for r in metrics] == list(range(1, STEPS + 1))
    first, last = metrics[0]["loss"], metrics[-1]["loss"]
    assert last < 0.75 * first, (first, last)
    assert metrics[-1]["epoch"] == SETTINGS["epochs"]
    assert (reference_run / "work" / "metrics.jsonl").read_text() == (reference_run / "metrics.jsonl").read_text()

    stored = record(reference_run)
    assert stored["steps"] == STEPS
    assert stored["images_seen"] == STEPS * SETTINGS["batch_size"]
    assert stored["skipped_samples"] == 0
    assert stored["samples"] == 512
    assert stored["world_size"] == 1
    assert stored["fixed"] == ["pos_embed", "decoder_pos_embed"]
    assert stored["settings"]["blr"] == SETTINGS["blr"] and stored["settings"]["model"]["size"] == SIZE
    from dpvip.models.mae import MaskedAutoencoder, count_parameters

    model = MaskedAutoencoder(settings().model)
    assert stored["trainable_parameters"] == count_parameters(model) > 0
    assert not any("pos_embed" in name for name in weights(reference_run))  # buffers, not stored weights
    assert checkpoint.load(reference_run / "work" / "state.pt")["step"] == STEPS


@pytest.mark.slow
def test_a_crashed_run_resumes_to_the_uninterrupted_weights_bit_for_bit(
    reference_run, shaders_index, tmp_path, monkeypatch
):
    run = tmp_path / "run"
    resumable = settings(checkpoint_every=6)  # states at steps 6 and 12; the crash is in step 10
    crash_on_call(monkeypatch, MAEPretraining, 10)
    with pytest.raises(RuntimeError, match="simulated crash"):
        pretrain_mae(resumable, shaders_index, run, progress=False)
    assert checkpoint.load(run / "work" / "state.pt")["step"] == 6
    assert [r["step"] for r in read_metrics(run / "work" / "metrics.jsonl")] == list(range(1, 10))
    assert not (run / "model.pt").exists()

    monkeypatch.undo()
    stored = pretrain_mae(resumable, shaders_index, run, progress=False)
    assert_identical(weights(run), weights(reference_run))
    assert logged(run) == logged(reference_run)  # each step once, the same losses and rates
    assert stored["steps"] == STEPS and stored["images_seen"] == STEPS * SETTINGS["batch_size"]
    assert not list(run.rglob("*.partial"))


@pytest.mark.slow
def test_sigterm_saves_the_state_and_the_resumed_run_matches(reference_run, shaders_index, tmp_path, monkeypatch):
    run = tmp_path / "run"
    original, count = MAEPretraining.train_step, [0]

    def train_step(self, *args):
        result = original(self, *args)
        count[0] += 1
        if count[0] == 11:  # step 11 (in the second epoch) completes, then the signal comes
            os.kill(os.getpid(), signal.SIGTERM)
        return result

    monkeypatch.setattr(MAEPretraining, "train_step", train_step)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit, match="SIGTERM at step 11 of 16"):
        pretrain_mae(settings(), shaders_index, run, progress=False)
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is put back
    assert checkpoint.load(run / "work" / "state.pt")["step"] == 11
    assert count[0] == 11

    monkeypatch.undo()
    pretrain_mae(settings(), shaders_index, run, progress=False)
    assert_identical(weights(run), weights(reference_run))
    assert logged(run) == logged(reference_run)


@pytest.mark.slow
def test_micro_batches_give_the_same_weights_up_to_summation_order(reference_run, shaders_index, tmp_path):
    stored = pretrain_mae(settings(micro_batch=16), shaders_index, tmp_path / "run", progress=False)
    assert stored["steps"] == STEPS
    difference = max_difference(weights(tmp_path / "run"), weights(reference_run))
    assert difference < 1e-4
    for (step, loss, lr), (ref_step, ref_loss, ref_lr) in zip(
        logged(tmp_path / "run"), logged(reference_run), strict=True
    ):
        assert (step, lr) == (ref_step, ref_lr)
        assert loss == pytest.approx(ref_loss, rel=1e-5)


def test_micro_batch_must_divide_the_rank_batch(shaders_index, tmp_path):
    with pytest.raises(DpvipInputError, match=r"micro.?batch 24 does not divide the per-\w+ batch 64"):
        MAEPretraining(settings(micro_batch=24), shaders_index, tmp_path / "run", progress=False)


@pytest.mark.parametrize(
    "size, changes, named",
    [
        (SIZE, {"blr": 3e-3}, "blr 0.0015 (now 0.003)"),
        ("mini", {}, "model.size 'micro' (now 'mini')"),
        (SIZE, {"mask_ratio": 0.5}, "model.mask_ratio 0.75 (now 0.5)"),
        (SIZE, {"epochs": 3}, "epochs 2 (now 3)"),
    ],
)
def test_resuming_with_other_training_settings_is_refused_by_name(
    reference_run, shaders_index, tmp_path, size, changes, named
):
    run = tmp_path / "run"
    shutil.copytree(reference_run / "work", run / "work")
    with pytest.raises(DpvipInputError) as caught:
        pretrain_mae(settings(size, **changes), shaders_index, run, progress=False)
    message = str(caught.value)
    assert named in message and str(run / "work" / "state.pt") in message
    assert "\n" not in message


def test_resuming_on_other_data_is_refused(reference_run, one_shard_index, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(reference_run / "work", run / "work")
    with pytest.raises(DpvipInputError, match=r"belongs to a run with data '[0-9a-f]{64}' \(now '[0-9a-f]{64}'\)"):
        pretrain_mae(settings(), one_shard_index, run, progress=False)


def test_operational_settings_may_change_on_resume(reference_run, shaders_index, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(reference_run / "work", run / "work")
    stored = pretrain_mae(
        settings(log_every=5, checkpoint_every=1, workers=1, micro_batch=32), shaders_index, run, progress=False
    )
    assert stored["steps"] == STEPS
    assert_identical(weights(run), weights(reference_run))
    assert logged(run) == logged(reference_run)


def test_corrupt_samples_are_skipped_and_counted(corrupt_index, tmp_path):
    run = tmp_path / "run"
    # One epoch of 128 samples in batches of 32: the corrupt sample is drawn exactly once.
    stored = pretrain_mae(settings(epochs=1, batch_size=32), corrupt_index, run, progress=False)
    assert stored["steps"] == 4
    assert stored["skipped_samples"] == 1
    assert stored["images_seen"] == 127
    metrics = read_metrics(run / "metrics.jsonl")
    skipped = [r["skipped"] for r in metrics]  # running totals
    assert skipped[-1] == 1 and skipped == sorted(skipped)
    assert all(r["loss"] == r["loss"] and r["loss"] > 0 for r in metrics)  # finite, not NaN


def test_dataloader_workers_do_not_change_the_weights(one_shard_index, tmp_path):
    small = {"epochs": 1, "batch_size": 32}
    pretrain_mae(settings(**small, workers=0), one_shard_index, tmp_path / "serial", progress=False)
    pretrain_mae(settings(**small, workers=2), one_shard_index, tmp_path / "workers", progress=False)
    assert_identical(weights(tmp_path / "workers"), weights(tmp_path / "serial"))
    assert logged(tmp_path / "workers") == logged(tmp_path / "serial")


def test_resumed_metrics_average_the_same_window_as_the_uninterrupted_run(one_shard_index, tmp_path, monkeypatch):
    """With log_every 4 and a state at step 3, the record of step 4 must still average steps
    1-4 (as the uninterrupted run logs it), not only the steps run since the resume."""
    small = settings(epochs=2, batch_size=32, log_every=4, checkpoint_every=3)
    pretrain_mae(small, one_shard_index, tmp_path / "whole", progress=False)
    crash_on_call(monkeypatch, MAEPretraining, 6)
    with pytest.raises(RuntimeError):
        pretrain_mae(small, one_shard_index, tmp_path / "resumed", progress=False)
    monkeypatch.undo()
    pretrain_mae(small, one_shard_index, tmp_path / "resumed", progress=False)
    assert_identical(weights(tmp_path / "resumed"), weights(tmp_path / "whole"))
    assert [step for step, _, _ in logged(tmp_path / "resumed")] == [4, 8]
    assert logged(tmp_path / "resumed") == logged(tmp_path / "whole")


def test_a_rank_whose_share_is_all_corrupt_still_joins_the_update(shaders_index, tmp_path, monkeypatch):
    """Under DDP every rank must run its backward pass; a rank that lost its whole share to
    corrupt samples contributes a zero-weighted pass (here: the other ranks' 8 samples are
    simulated by the global count)."""

    from dpvip.train.distributed import Distributed

    training = MAEPretraining(settings(), shaders_index, tmp_path / "run", progress=False)
    monkeypatch.setattr(
        Distributed, "sum", lambda self, value: 8.0 if value == 0 and isinstance(value, int) else float(value)
    )
    loss_sum, count = training.train_step(*training.empty_batch())
    assert count == 8 and loss_sum == 0.0
    grads = [p.grad for p in training.model.parameters()]
    assert all(g is not None and not g.any() for g in grads)
