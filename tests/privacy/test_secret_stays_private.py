"""Every DP path, run as the workflow runs it (its job function, secret randomness): the run
makes one key in the key store, outside the folder it writes, mode 0600, and neither the
key's bytes nor its hex appear in any file the run writes: model.pt, state, metrics, result
JSON, privacy ledger. The key is deleted once the run is done (here kept, with
privacy.keep_keys, to be looked for; `test_keys_are_deleted_when_runs_end` without). Each
run's ledger says its randomness is secret."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import torch

from conftest import write_synthetic_index
from dpvip.privacy.randomness import KEY_SUFFIX, key_path

pytestmark = [pytest.mark.usefixtures("torch_one_thread"), pytest.mark.slow]


@pytest.fixture(autouse=True)
def kept_keys(request, monkeypatch):
    """Keys kept after the runs (privacy.keep_keys), so that the files can be searched for them."""
    if request.node.name != "test_keys_are_deleted_when_runs_end":
        monkeypatch.setenv("DPVIP_KEEP_KEYS", "true")


def keys_of(folder: Path) -> list[Path]:
    """The keys of the runs under `folder`, in the key store (which mirrors run folders)."""
    return sorted(key_path(folder / "run").parent.rglob(f"*{KEY_SUFFIX}"))


def assert_key_stays_private(folder: Path, key_store: Path, runs: int = 1) -> None:
    keys = keys_of(folder)
    assert keys and all(key.is_relative_to(key_store) for key in keys)
    assert len(keys) == runs, keys
    assert not list(folder.rglob(f"*{KEY_SUFFIX}")), "no key in the folder the run writes"
    written = [p for p in folder.rglob("*") if p.is_file()]
    assert written
    for key_file in keys:
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        assert key_file.name.endswith(f"work{KEY_SUFFIX}"), "one key per run's private work folder"
        key = key_file.read_bytes()
        needles = [key, key.hex().encode(), key.hex().upper().encode()]
        for path in written:
            content = path.read_bytes()
            assert not any(needle in content for needle in needles), f"{path} holds the key of {key_file}"


def test_dp_mae(tmp_path, key_store):
    from dpvip.plan.dp_pretrain import DPPretrainSettings
    from dpvip.train.dp_mae import dp_train_mae

    index = write_synthetic_index(tmp_path / "data", "shaders", 64, 32, 64, options={"programs": 4})
    values = {"image_size": 32, "patch_size": 4, "steps": 2, "batch_size": 16, "micro_batch": 8, "checkpoint_every": 1}
    dp_train_mae(DPPretrainSettings.from_config(values, "pico"), index, tmp_path / "run", progress=False)
    assert json.loads((tmp_path / "run" / "privacy.json").read_text())["randomness"] == "secret"
    assert_key_stays_private(tmp_path / "run", key_store)


def test_dp_finetune(tmp_path, key_store):
    from dpvip.evaluate.jobs import run_evaluation
    from dpvip.models import MAESettings
    from dpvip.models.checkpoint import save_mae
    from dpvip.models.mae import MaskedAutoencoder
    from dpvip.plan.vip_evaluations import Evaluation

    torch.manual_seed(0)
    checkpoint = tmp_path / "mae" / "model.pt"
    checkpoint.parent.mkdir()
    save_mae(MaskedAutoencoder(MAESettings("pico", image_size=32, patch_size=4)), checkpoint, {})
    features = {"pooling": "mean", "last_blocks": 1, "final_norm": True}
    section = {
        "image_size": 16,
        "datasets": {"ImageNet-1K": {"source": "digits", "test_fraction": 0.2, "seed": 0}},
        "dp_finetune": {"dataset": "ImageNet-1K", "batch_size": 256, "steps": 2, "micro_batch": 256}
        | {"features": features},
    }
    out = tmp_path / "evaluate" / "dp.json"
    run_evaluation(Evaluation("dp_finetune", "vip_pico", "ImageNet-1K"), section, str(checkpoint), out)
    assert json.loads(out.read_text())["privacy"]["randomness"] == "secret"
    assert_key_stays_private(tmp_path / "evaluate", key_store)


def test_dprandp_private(tmp_path, key_store):
    from dpvip.plan.dprandp_private import PrivateSettings
    from dpvip.plan.dprandp_runs import COLD, PrivateRun
    from dpvip.randp.jobs import run_private_job

    run = PrivateRun("CIFAR-10", COLD, "wrn10_1", 1, 2.0, 0)
    settings = PrivateSettings(
        model="wrn10_1",
        epsilon=2.0,
        steps=2,
        phase2_steps=1,
        lr_phase2=1.0,
        lr_phase3=0.5,
        batch_size=64,
        augmult=1,
        image_size=8,
        micro_batch=64,
    )
    out = tmp_path / "private" / "run.json"
    data = {"source": "digits", "validation_fraction": 0.1}
    result = run_private_job(run, settings, data, None, out, progress=False)
    assert result["privacy"]["randomness"] == "secret"
    assert_key_stays_private(tmp_path / "private", key_store)


@pytest.mark.parametrize("kind", ["head", "probe"])
def test_dp_transfer_study(tmp_path, key_store, kind):
    """Mehta et al.'s heads and DP-RandP's private probe: one study job, one key, a stream
    per run."""
    from dpvip.evaluate.datasets import LabelledImages
    from dpvip.plan.transfer_runs import FeatureSet, Run
    from dpvip.transfer.cache import cache_features
    from dpvip.transfer.jobs import run_study

    generator = torch.Generator().manual_seed(0)

    def split(n):
        return LabelledImages(torch.randn(n, 3, 4, 4, generator=generator), torch.arange(n) % 3, 3, "tiny")

    weight = torch.randn(48, 6, generator=generator)
    cache = tmp_path / "cache"
    cache_features(lambda x: x.flatten(1) @ weight, split(60), split(20), cache, fingerprint={}, progress=False)
    features = FeatureSet("tiny", "blobs", "prelogits", 4)
    common = {"delta": 1e-5, "clip_norm": 1.0, "randomness": "secret"}
    if kind == "head":
        settings = common | {"optimizer": "adam", "lr": 0.1, "batch_fraction": 0.5, "epochs": 1.0, "epsilon": 4.0}
    else:
        settings = common | {"epsilon": 4.0, "steps": 2, "lr": 1.0}
    runs = [Run(kind, "row", f"seed {seed}", features, settings | {"seed": seed}) for seed in (0, 1)]
    out = tmp_path / "study" / "study.json"
    out.parent.mkdir()  # Snakemake makes an output's folder
    result = run_study("study", runs, {features.path: cache}, out, progress=False)
    assert all(r["result"]["privacy"]["randomness"] == "secret" for r in result["runs"])
    assert_key_stays_private(tmp_path / "study", key_store)


def test_keys_are_deleted_when_runs_end(tmp_path, key_store):
    """Without privacy.keep_keys a finished run leaves no key, and no state to resume: a
    forced rerun trains afresh with a new key (DP-MAE, whose state outlived its run before)."""
    from dpvip.plan.dp_pretrain import DPPretrainSettings
    from dpvip.train.dp_mae import dp_train_mae

    index = write_synthetic_index(tmp_path / "data", "shaders", 32, 32, 32, options={"programs": 4})
    values = {"image_size": 32, "patch_size": 4, "steps": 2, "batch_size": 8, "micro_batch": 8, "checkpoint_every": 1}
    settings = DPPretrainSettings.from_config(values, "pico")
    first = dp_train_mae(settings, index, tmp_path / "run", progress=False)
    assert not keys_of(tmp_path) and not (tmp_path / "run" / "work" / "state.pt").exists()
    weights = torch.load(tmp_path / "run" / "model.pt", weights_only=False)["model"]
    again = dp_train_mae(settings, index, tmp_path / "run", progress=False)  # as `snakemake --forcerun` does
    assert again["steps"] == first["steps"] == 2
    rerun = torch.load(tmp_path / "run" / "model.pt", weights_only=False)["model"]
    assert any(not torch.equal(weights[k], rerun[k]) for k in weights)  # trained afresh, other noise
