"""DP MAE training: the ledger travels with the run; a crashed run resumes to exactly the
uninterrupted one (weights, log, ledger); resuming with another mechanism, or going past the
budget, is refused; two gloo processes train what one does; the run starts from a (Syn)-ViP
checkpoint (also with another decoder depth)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from conftest import run_dpvip
from dpvip.errors import DpvipInputError
from dpvip.models.checkpoint import read_mae
from dpvip.privacy.ledger import BudgetExceeded
from conftest import share_key as share_key_of
from dpvip.privacy.randomness import key_path
from dpvip.train.dp_mae import DPMAETraining, dp_train_mae
from dpvip.plan.dp_pretrain import DPPretrainSettings
from dpvip.train.metrics import read_metrics
from pretrain_data import (  # noqa: F401  (fixtures)
    SIZE,
    assert_identical,
    corrupt_index,
    crash_on_call,
    max_difference,
    one_thread,
    record,
    reference_run,
    shaders_index,
    single_thread,
    weights,
)

# keep_keys: runs compared with one key share it after the first has ended
pytestmark = pytest.mark.usefixtures("single_thread", "keep_keys")

# 6 DP steps at q = 64/512 on the 512 shader images; micro-batches of 16.
DP_SETTINGS = {
    "image_size": 32,
    "patch_size": 4,
    "steps": 6,
    "batch_size": 64,
    "lr": 1e-3,
    "warmup_steps": 1,
    "clip_norm": 0.5,
    "micro_batch": 16,
    "log_every": 1,
    "checkpoint_every": 2,
}


def dp_settings(size: str = SIZE, **changes) -> DPPretrainSettings:
    return DPPretrainSettings.from_config(DP_SETTINGS | changes, size)


@pytest.fixture(scope="module")
def dp_run(shaders_index, reference_run, tmp_path_factory):
    """The uninterrupted one-process DP run, from the (Syn)-ViP reference checkpoint."""
    folder = tmp_path_factory.mktemp("dp-reference") / "run"
    with one_thread(), pytest.MonkeyPatch.context() as patch:
        patch.setenv("DPVIP_KEEP_KEYS", "true")  # tests give its key to other runs
        dp_train_mae(dp_settings(), shaders_index, folder, reference_run / "model.pt", progress=False)
    return folder


def test_the_ledger_is_in_model_metrics_and_privacy_json(dp_run):
    ledger = record(dp_run)["privacy"]
    assert ledger["steps_done"] == ledger["planned_steps"] == 6
    assert ledger["sample_rate"] == 64 / 512 and ledger["delta"] == 1 / 1024 and ledger["clip_norm"] == 0.5
    assert 7.9 < ledger["epsilon_spent"] <= ledger["target_epsilon"] == 8.0
    assert json.loads((dp_run / "privacy.json").read_text()) == ledger | {
        "examples": 512,
        "init": record(dp_run)["init"],
    }
    metrics = read_metrics(dp_run / "metrics.jsonl")
    epsilons = [r["epsilon"] for r in metrics]
    assert [r["step"] for r in metrics] == list(range(1, 7))
    assert epsilons == sorted(epsilons) and epsilons[-1] == pytest.approx(ledger["epsilon_spent"])
    # Poisson sampling: the realised batch varies around q n = 64.
    sizes = [r["batch_size"] for r in metrics]
    assert len(set(sizes)) > 1 and all(30 < size < 100 for size in sizes)


def test_the_run_starts_from_the_syn_vip_checkpoint(shaders_index, reference_run, tmp_path):
    training = DPMAETraining(dp_settings(), shaders_index, tmp_path / "run", reference_run / "model.pt", progress=False)
    assert_identical(training.model.state_dict(), read_mae(reference_run / "model.pt")["model"])
    assert training.initialised_fresh == []


def test_another_decoder_depth_keeps_the_encoder_and_matching_decoder_blocks(shaders_index, reference_run, tmp_path):
    training = DPMAETraining(
        dp_settings("micro_dec3"), shaders_index, tmp_path / "run", reference_run / "model.pt", progress=False
    )
    stored = read_mae(reference_run / "model.pt")["model"]
    own = training.model.state_dict()
    assert training.initialised_fresh and all(key.startswith("decoder_blocks.2.") for key in training.initialised_fresh)
    assert all(torch.equal(own[key], value) for key, value in stored.items())


def share_key(run: Path, other: Path) -> None:
    """Give `other` the secret key of `run` (a run started elsewhere with the same secret)."""
    share_key_of(run / "work", other / "work")


def test_a_crashed_run_resumes_to_the_uninterrupted_one(dp_run, shaders_index, reference_run, tmp_path, monkeypatch):
    """In secret mode: the resumed run reads its key back and ends bit-identical."""
    share_key(dp_run, tmp_path / "run")
    crash_on_call(monkeypatch, DPMAETraining, 4)  # after the checkpoint at step 2, before step 4
    with pytest.raises(RuntimeError, match="simulated crash"):
        dp_train_mae(dp_settings(), shaders_index, tmp_path / "run", reference_run / "model.pt", progress=False)
    monkeypatch.undo()
    state = torch.load(tmp_path / "run" / "work" / "state.pt", weights_only=True)
    assert state["step"] == 2 and state["privacy"]["steps_done"] == 2
    dp_train_mae(dp_settings(), shaders_index, tmp_path / "run", reference_run / "model.pt", progress=False)
    assert_identical(weights(tmp_path / "run"), weights(dp_run))
    assert record(tmp_path / "run")["privacy"] == record(dp_run)["privacy"]
    strip = lambda records: [{k: v for k, v in r.items() if k != "images_per_second"} for r in records]  # noqa: E731
    assert strip(read_metrics(tmp_path / "run" / "metrics.jsonl")) == strip(read_metrics(dp_run / "metrics.jsonl"))


def test_two_runs_of_one_config_differ_when_secret_and_agree_when_seeded(shaders_index, tmp_path):
    def run(name: str, **changes) -> dict:
        dp_train_mae(dp_settings(steps=2, **changes), shaders_index, tmp_path / name, progress=False)
        return weights(tmp_path / name)

    assert max_difference(run("secret_a"), run("secret_b")) > 1e-4
    assert (
        key_path(tmp_path / "secret_a" / "work").read_bytes() != key_path(tmp_path / "secret_b" / "work").read_bytes()
    )
    assert_identical(run("seeded_a", randomness="seeded"), run("seeded_b", randomness="seeded"))
    assert not key_path(tmp_path / "seeded_a" / "work").exists()
    ledger = record(tmp_path / "seeded_a")["privacy"]
    assert ledger["randomness"] == "seeded" and "NOT PRIVATE" in ledger["note"]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"clip_norm": 0.25}, "clip_norm"),
        ({"batch_size": 32}, "sample_rate"),
        ({"epsilon": 4.0}, "noise_multiplier"),
        ({"randomness": "seeded"}, "randomness"),
    ],
)
def test_resuming_with_another_mechanism_is_refused(shaders_index, tmp_path, monkeypatch, change, named):
    crash_on_call(monkeypatch, DPMAETraining, 4)
    with pytest.raises(RuntimeError):
        dp_train_mae(dp_settings(), shaders_index, tmp_path / "run", progress=False)
    monkeypatch.undo()
    with pytest.raises(DpvipInputError, match=f"trained with {named} .*would break its privacy accounting"):
        dp_train_mae(dp_settings(**change), shaders_index, tmp_path / "run", progress=False)


def test_a_step_past_the_budget_is_refused(shaders_index, tmp_path):
    training = DPMAETraining(dp_settings(steps=2), shaders_index, tmp_path / "run", progress=False)

    def drawn() -> tuple[torch.Tensor, torch.Tensor]:  # as many images as the step's Poisson batch
        count = len(training.dp_step.batch(training.step))
        return torch.randn(count, 3, 32, 32), training.model.mask_noise(count)

    for _ in range(2):
        training.train_step(*drawn())
        training.step += 1  # as the loop counts them
    with pytest.raises(BudgetExceeded, match="would exceed the privacy budget"):
        training.train_step(*drawn())
    assert training.ledger.steps_done == 2


@pytest.mark.slow
def test_the_first_examples_only(shaders_index, tmp_path):
    training = DPMAETraining(dp_settings(examples=256), shaders_index, tmp_path / "run", progress=False)
    assert training.sample_rate == 64 / 256 and training.ledger.delta == 1 / 512
    assert max(max(training.sampler.indices(step), default=0) for step in range(6)) < 256
    with pytest.raises(DpvipInputError, match="examples 1024 exceeds the 512 examples"):
        DPMAETraining(dp_settings(examples=1024), shaders_index, tmp_path / "other", progress=False)


@pytest.mark.slow
@pytest.mark.slow
def test_two_gloo_processes_train_what_one_does(dp_run, shaders_index, reference_run, tmp_path):
    """Sampling and noise do not depend on the number of ranks, so two processes (each with
    its blocks of examples, sums all-reduced, noise added once) match one process up to
    the order of floating-point sums."""
    settings = tmp_path / "settings.yaml"
    settings.write_text(yaml.safe_dump(DP_SETTINGS))
    share_key(dp_run, tmp_path / "run")  # every rank reads the run's one key
    done = run_dpvip(
        "pretrain",
        "dp-mae",
        "--settings",
        str(settings),
        "--size",
        SIZE,
        "--data",
        str(shaders_index),
        "--init",
        str(reference_run / "model.pt"),
        "--out",
        str(tmp_path / "run"),
        "--procs",
        "2",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert record(tmp_path / "run")["world_size"] == 2
    assert record(tmp_path / "run")["privacy"] == record(dp_run)["privacy"]
    assert max_difference(weights(tmp_path / "run"), weights(dp_run)) < 1e-5
    batches = lambda run: [r["batch_size"] for r in read_metrics(run / "metrics.jsonl")]  # noqa: E731
    assert batches(tmp_path / "run") == batches(dp_run)
    shutil.rmtree(tmp_path / "run")


def test_corrupt_samples_in_the_batch_are_skipped_and_counted(corrupt_index, tmp_path):
    """A corrupt sample drawn into a Poisson batch is skipped and counted; the DP step takes
    the rest of the batch (it checks the examples it is given against the batch it drew,
    the unreadable ones included)."""
    stored = dp_train_mae(
        dp_settings(steps=6, batch_size=64, randomness="seeded"), corrupt_index, tmp_path / "run", progress=False
    )
    assert stored["skipped_samples"] >= 1 and stored["privacy"]["steps_done"] == 6
    metrics = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert metrics[-1]["skipped"] == stored["skipped_samples"]
    assert all(r["loss"] == r["loss"] and r["loss"] > 0 for r in metrics)  # finite, not NaN
