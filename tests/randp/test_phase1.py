"""DP-RandP Phase I: views are a function of (seed, epoch, index); a tiny run trains and its
backbone loads for Phase II with a zero classifier; a run stopped by a crash or SIGTERM
resumes to the uninterrupted weights bit for bit; the learning rate follows the milestones
and the batch size; bad settings are refused by name."""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import signal
import tarfile

import pytest
import torch
from conftest import write_synthetic_index

from dpvip.data.sampling import sample_seed
from dpvip.data.shard_reader import ShardReader
from dpvip.errors import DpvipInputError
from dpvip.models.wrn import WideResNet
from dpvip.randp.phase1 import (
    EpochMilestones,
    Phase1Settings,
    Phase1Training,
    load_backbone,
    train_phase1,
)
from dpvip.randp.phase1_views import view_pairs
from dpvip.synthetic.shards import shard_name
from dpvip.train import checkpoint
from dpvip.train.metrics import read_metrics

pytestmark = pytest.mark.usefixtures("torch_one_thread")

IMAGES, SHARD_SIZE = 64, 32
# 2 epochs of 4 steps (batch 16 of 64 images), lr x0.1 from the second epoch.
TINY = {
    "image_size": 16,
    "epochs": 2,
    "batch_size": 16,
    "milestones": [1],
    "projection": {"hidden": 64, "out": 32},
    "moco": {"queue": 24, "milestones": [1]},
    "log_every": 1,
    "checkpoint_every": 3,
}
STEPS = 8


def tiny(method: str = "align_uniform", **changes) -> Phase1Settings:
    return Phase1Settings.from_config(TINY | changes, "wrn10_1", method)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """64 StyleGAN-Oriented images at 32 px in two shards (under a second)."""
    options = {"rebuild_every": 400, "block_size": 8}
    return write_synthetic_index(
        tmp_path_factory.mktemp("stylegan"), "stylegan_oriented", IMAGES, 32, SHARD_SIZE, options=options
    )


@pytest.fixture(scope="module")
def runs(index, tmp_path_factory):
    """Uninterrupted runs, one per method, trained on first use."""
    made = {}

    def run(method: str):
        if method not in made:
            made[method] = tmp_path_factory.mktemp(method) / "run"
            train_phase1(tiny(method), index, made[method], progress=False)
        return made[method]

    return run


def stored(run_dir) -> dict:
    return torch.load(run_dir / "model.pt", weights_only=True)


def assert_same_weights(run_dir, reference) -> None:
    a, b = stored(run_dir), stored(reference)
    for part in ("model", "head"):
        different = [k for k in a[part] if not torch.equal(a[part][k], b[part][k])]
        assert not different, f"{part}: {different[:3]} differ"


def logged(run_dir) -> list[tuple[int, float, float]]:
    return [(r["step"], r["loss"], r["lr"]) for r in read_metrics(run_dir / "metrics.jsonl")]


# --- views ---------------------------------------------------------------------------------
def test_views_are_a_pure_function_of_seed_epoch_and_index_and_the_two_differ(index):
    views = view_pairs(ShardReader.from_index(index), 16)
    first = views[(5, sample_seed(0, 1, 5))]
    pair, noise = first
    assert pair.shape == (2, 3, 16, 16) and noise.numel() == 0
    again = view_pairs(ShardReader.from_index(index), 16)[(5, sample_seed(0, 1, 5))][0]
    assert torch.equal(pair, again)
    assert not torch.equal(pair[0], pair[1])
    assert not torch.equal(pair, views[(5, sample_seed(0, 2, 5))][0])  # another epoch
    assert not torch.equal(pair, views[(5, sample_seed(1, 1, 5))][0])  # another run seed
    before = torch.get_rng_state()
    views[(6, 123)]
    assert torch.equal(torch.get_rng_state(), before)  # the global stream is left alone


# --- a run ---------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["align_uniform", "moco"])
def test_a_tiny_run_trains_and_its_backbone_starts_phase2_with_a_zero_classifier(runs, method):
    run = runs(method)
    metrics = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in metrics] == list(range(1, STEPS + 1))
    assert all(math.isfinite(r["loss"]) for r in metrics)
    lr = (0.12 if method == "align_uniform" else 0.03) * 16 / 256
    assert [r["lr"] for r in metrics] == pytest.approx([lr] * 4 + [lr / 10] * 4)

    record = stored(run)["record"]
    assert record["stage"] == "dprandp_phase1" and record["method"] == method
    assert (record["steps"], record["samples"], record["skipped_samples"]) == (STEPS, IMAGES, 0)
    assert record["final_loss"] == metrics[-1]["loss"]
    assert record["settings"] == tiny(method).fingerprint()
    assert record["data"].endswith("index.json")
    assert record["trainable_parameters"] > 0

    model, loaded = load_backbone(run / "model.pt", num_classes=7)
    assert loaded == record
    assert model.classifier.out_features == 7 and model.classifier.in_features == model.feature_channels
    assert not model.classifier.weight.any() and not model.classifier.bias.any()
    weights = stored(run)["model"]
    assert all(torch.equal(model.state_dict()[k], v) for k, v in weights.items() if not k.startswith("classifier."))
    torch.manual_seed(0)
    untrained = WideResNet("wrn10_1").state_dict()  # the run's initialisation
    assert not torch.equal(weights["stem.weight"], untrained["stem.weight"])
    assert torch.equal(weights["classifier.weight"], untrained["classifier.weight"])  # never trained
    assert model(torch.zeros(2, 3, 16, 16)).shape == (2, 7)


def test_load_backbone_refuses_missing_and_foreign_files(tmp_path):
    with pytest.raises(DpvipInputError, match="does not exist"):
        load_backbone(tmp_path / "none.pt", 10)
    checkpoint.save_atomic({"format": "dpvip.mae/1", "model": {}}, tmp_path / "mae.pt")
    with pytest.raises(DpvipInputError, match="is not a DP-RandP Phase I checkpoint"):
        load_backbone(tmp_path / "mae.pt", 10)


# --- resuming --------------------------------------------------------------------------------
def test_a_crashed_run_resumes_to_the_uninterrupted_weights_bit_for_bit(runs, index, tmp_path, monkeypatch):
    run = tmp_path / "run"
    original, calls = Phase1Training.train_step, [0]

    def crashing(self, *args):
        calls[0] += 1
        if calls[0] == 5:  # states at step 3 and 6: the run restarts at 3
            raise RuntimeError("simulated crash")
        return original(self, *args)

    monkeypatch.setattr(Phase1Training, "train_step", crashing)
    with pytest.raises(RuntimeError, match="simulated crash"):
        train_phase1(tiny(), index, run, progress=False)
    assert checkpoint.load(run / "work" / "state.pt")["step"] == 3
    monkeypatch.undo()
    record = train_phase1(tiny(), index, run, progress=False)
    assert_same_weights(run, runs("align_uniform"))
    assert logged(run) == logged(runs("align_uniform"))
    assert record["final_loss"] == stored(runs("align_uniform"))["record"]["final_loss"]


def test_sigterm_stops_moco_with_its_queue_saved_and_the_resumed_run_matches(runs, index, tmp_path, monkeypatch):
    run = tmp_path / "run"
    original, calls = Phase1Training.train_step, [0]

    def signalled(self, *args):
        result = original(self, *args)
        calls[0] += 1
        if calls[0] == 5:
            os.kill(os.getpid(), signal.SIGTERM)
        return result

    monkeypatch.setattr(Phase1Training, "train_step", signalled)
    with pytest.raises(SystemExit, match="SIGTERM at step 5 of 8"):
        train_phase1(tiny("moco"), index, run, progress=False)
    state = checkpoint.load(run / "work" / "state.pt")
    assert state["step"] == 5 and state["model"]["queue_pointer"].item() == 5 * 16 % 24
    monkeypatch.undo()
    train_phase1(tiny("moco"), index, run, progress=False)
    assert_same_weights(run, runs("moco"))
    assert logged(run) == logged(runs("moco"))
    final, reference = checkpoint.load(run / "work" / "state.pt"), checkpoint.load(runs("moco") / "work" / "state.pt")
    assert torch.equal(final["model"]["queue"], reference["model"]["queue"])


def test_dataloader_workers_do_not_change_the_weights(index, tmp_path):
    train_phase1(tiny("moco", epochs=1), index, tmp_path / "serial", progress=False)
    train_phase1(tiny("moco", epochs=1, workers=2), index, tmp_path / "workers", progress=False)
    assert_same_weights(tmp_path / "workers", tmp_path / "serial")


def test_resuming_with_other_settings_is_refused_by_name(runs, index, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs("align_uniform") / "work", run / "work")
    with pytest.raises(DpvipInputError, match=r"belongs to a run with lr 0.12 \(now 0.2\)"):
        train_phase1(tiny(lr=0.2), index, run, progress=False)


def test_corrupt_samples_are_skipped_and_counted(index, tmp_path):
    corrupt = tmp_path / "corrupt.tar"
    with tarfile.open(index.parent / shard_name(0)) as source, tarfile.open(corrupt, "w") as sink:
        for member in source:
            data = source.extractfile(member).read()
            if member.name.endswith(".png") and member.name.startswith("000000003"):
                data = b"not a png" * 10
            copy = tarfile.TarInfo(member.name)
            copy.size = len(data)
            sink.addfile(copy, io.BytesIO(data))
    (tmp_path / "index.json").write_text(
        json.dumps({"shards": [{"file": "corrupt.tar", "samples": SHARD_SIZE}], "total_samples": SHARD_SIZE})
    )
    record = train_phase1(tiny(epochs=1), tmp_path / "index.json", tmp_path / "run", progress=False)
    assert record["steps"] == 2 and record["skipped_samples"] == 1 and record["images_seen"] == 31
    assert math.isfinite(record["final_loss"])


# --- learning rate and settings --------------------------------------------------------------
def test_the_learning_rate_drops_tenfold_at_each_milestone_epoch():
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    schedule = EpochMilestones(optimizer, 0.5, steps_per_epoch=10, milestones=(2, 4))
    assert [schedule.lr_at(s) for s in (0, 19, 20, 39, 40, 99)] == pytest.approx([0.5, 0.5, 0.05, 0.05, 0.005, 0.005])
    schedule.step_update(25)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.05)


def test_the_learning_rate_scales_with_the_batch_size():
    assert Phase1Settings().base_lr == pytest.approx(0.12)
    assert Phase1Settings(batch_size=1024).base_lr == pytest.approx(0.48)
    assert Phase1Settings(method="moco", batch_size=512).base_lr == pytest.approx(0.06)
    assert Phase1Settings(method="moco").lr_milestones == (120, 160)


def test_defaults_are_the_papers_and_the_config_section_is_read():
    paper = Phase1Settings()
    assert (paper.model, paper.image_size, paper.epochs, paper.batch_size, paper.milestones) == (
        "wrn16_4",
        32,
        200,
        256,
        (155, 170, 185),
    )
    assert (paper.projection_hidden, paper.projection_out, paper.momentum, paper.weight_decay) == (4096, 128, 0.9, 1e-4)
    assert (paper.moco_queue, paper.moco_momentum, paper.moco_temperature, paper.moco_lr) == (65536, 0.999, 0.07, 0.03)
    section = {
        "model": "wrn16_4",
        "dataset": "stylegan_oriented",
        "method": "moco",
        "image_size": 16,
        "epochs": 4,
        "milestones": [3],
        "projection": {"hidden": 512, "out": 128},
        "moco": {"queue": 1024, "momentum": 0.99, "temperature": 0.2, "lr": 0.03, "milestones": [3]},
        "checkpoint_every": 8,
        "log_every": 2,
        "workers": 0,
        "seed": 0,
        "weight_decay": 1.0e-4,
    }
    settings = Phase1Settings.from_config(section, "wrn10_1", "align_uniform")
    assert (settings.model, settings.method) == ("wrn10_1", "align_uniform")  # the caller's
    assert (settings.milestones, settings.projection_hidden, settings.moco_queue, settings.moco_milestones) == (
        (3,),
        512,
        1024,
        (3,),
    )
    assert settings.lr == 0.12  # absent: the paper's
    json.dumps(settings.fingerprint())


def test_the_fingerprint_holds_what_changes_the_weights():
    fingerprint = Phase1Settings().fingerprint()
    assert (
        "log_every" not in fingerprint
        and "moco_queue" not in fingerprint
        and fingerprint["milestones"] == [155, 170, 185]
    )
    assert Phase1Settings(moco_queue=5).fingerprint() == fingerprint  # align_uniform does not read it
    moco = Phase1Settings(method="moco").fingerprint()
    assert "alpha" not in moco and moco["moco_queue"] == 65536


@pytest.mark.parametrize(
    "section, named",
    [
        ({"lr": -0.1}, "setting lr -0.1 must be"),
        ({"image_size": 18}, "setting image_size 18 must be"),
        ({"batch_size": 1}, "setting batch_size 1 must be"),
        ({"milestones": [170, 155]}, "setting milestones (170, 155) must be"),
        ({"weight_decay": "1e-4"}, "setting weight_decay '1e-4' must be"),
        ({"projection": {"hidden": 100}}, "setting projection.hidden 100 must be"),
        ({"moco": {"temperature": 0}}, "setting moco.temperature 0 must be"),
        ({"moco": {"size": 3}}, "setting 'moco.size' is not known"),
        ({"moco_queue": 3}, "setting 'moco_queue' is not known"),
        ({"warmup": 3}, "setting 'warmup' is not known"),
    ],
)
def test_bad_settings_are_refused_by_name(section, named):
    with pytest.raises(DpvipInputError) as caught:
        Phase1Settings.from_config(section, "wrn10_1", "align_uniform")
    assert named in str(caught.value) and "\n" not in str(caught.value)


def test_unknown_models_and_methods_are_refused():
    with pytest.raises(DpvipInputError, match="model 'wrn28_10' is not a WRN size"):
        Phase1Settings.from_config({}, "wrn28_10", "align_uniform")
    with pytest.raises(DpvipInputError, match="method 'simclr' is not one of align_uniform, moco"):
        Phase1Settings.from_config({}, "wrn10_1", "simclr")
