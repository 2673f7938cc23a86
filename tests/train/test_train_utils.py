"""Training utilities: atomic checkpoints that load with weights_only and carry the RNG
states, one-line errors for unreadable checkpoints, the resume-safe metrics log, the
warm-up + cosine schedule and AdamW's weight-decay groups."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from dpvip.errors import DpvipInputError
from dpvip.models.mae import MaskedAutoencoder, MAESettings
from dpvip.train import checkpoint
from dpvip.train.metrics import MetricsLog, read_metrics
from dpvip.train.optim import adamw, warmup_cosine


def test_save_atomic_writes_a_weights_only_file_and_no_partial(tmp_path):
    path = tmp_path / "deep" / "folder" / "state.pt"
    payload = {"model": {"w": torch.arange(6.0).reshape(2, 3)}, "step": 7, "name": "x", "pair": [0.9, 0.95]}
    checkpoint.save_atomic(payload, path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["state.pt"]
    loaded = torch.load(path, weights_only=True)
    assert torch.equal(loaded["model"]["w"], payload["model"]["w"])
    assert {k: loaded[k] for k in ("step", "name", "pair")} == {"step": 7, "name": "x", "pair": [0.9, 0.95]}

    checkpoint.save_atomic({"step": 8}, path)  # replaces the previous file
    assert checkpoint.load(path) == {"step": 8}
    assert sorted(p.name for p in path.parent.iterdir()) == ["state.pt"]


def test_a_failed_save_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "state.pt"
    checkpoint.save_atomic({"step": 1}, path)

    def broken_save(payload, target):
        with open(target, "wb") as handle:
            handle.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint.torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save_atomic({"step": 2}, path)
    monkeypatch.undo()
    assert checkpoint.load(path) == {"step": 1}


def _draws() -> tuple:
    return torch.rand(4), np.random.rand(4), [random.random() for _ in range(4)], np.random.randn(1)


def test_rng_states_round_trip_through_a_weights_only_checkpoint(tmp_path):
    torch.manual_seed(1)
    np.random.seed(2)
    random.seed(3)
    np.random.randn()  # leaves a cached Gaussian in numpy's legacy state
    checkpoint.save_atomic({"rng": checkpoint.rng_states()}, tmp_path / "state.pt")
    expected = _draws()
    _draws()  # move every generator on
    checkpoint.restore_rng_states(checkpoint.load(tmp_path / "state.pt")["rng"])
    again = _draws()
    assert torch.equal(again[0], expected[0])
    assert np.array_equal(again[1], expected[1]) and np.array_equal(again[3], expected[3])
    assert again[2] == expected[2]


def test_a_missing_checkpoint_is_named(tmp_path):
    with pytest.raises(DpvipInputError, match=f"^checkpoint {tmp_path / 'nope.pt'} does not exist$"):
        checkpoint.load(tmp_path / "nope.pt")


@pytest.mark.parametrize(
    "content", [b"", b"garbage, not a checkpoint\n" * 40, b"PK\x03\x04 truncated zip"], ids=["empty", "text", "cut-zip"]
)
def test_an_unreadable_checkpoint_is_refused_in_one_line(tmp_path, content):
    path = tmp_path / "state.pt"
    path.write_bytes(content)
    with pytest.raises(DpvipInputError) as caught:
        checkpoint.load(path)
    assert str(caught.value).startswith(f"checkpoint {path} cannot be read: ")
    assert "\n" not in str(caught.value)


def test_a_checkpoint_with_arbitrary_objects_is_refused(tmp_path):
    path = tmp_path / "state.pt"
    torch.save({"settings": MAESettings("micro")}, path)  # a dataclass: not weights-only
    with pytest.raises(DpvipInputError, match="cannot be read"):
        checkpoint.load(path)


def test_metrics_log_drops_records_beyond_the_resume_step(tmp_path):
    path = tmp_path / "work" / "metrics.jsonl"
    log = MetricsLog(path)
    assert path.exists() and read_metrics(path) == []
    for step in range(1, 11):
        log.write({"step": step, "loss": 1.0 / step})
    MetricsLog(path, resume_step=6).write({"step": 7, "loss": 0.5})
    assert [r["step"] for r in read_metrics(path)] == [1, 2, 3, 4, 5, 6, 7]
    assert read_metrics(path)[2] == {"step": 3, "loss": 1.0 / 3}
    assert read_metrics(path)[-1]["loss"] == 0.5
    MetricsLog(path, resume_step=0)
    assert read_metrics(path) == []
    assert not list(path.parent.glob("*.partial"))


def _scheduled(total=100, warmup=10, lr=1e-3, min_lr=1e-5) -> tuple[torch.optim.Optimizer, list[float]]:
    model = MaskedAutoencoder(MAESettings("micro", image_size=32, patch_size=4))
    optimizer = adamw(model, lr, 0.05, (0.9, 0.95))
    scheduler = warmup_cosine(optimizer, total, warmup, min_lr)
    rates = []
    for step in range(total + 1):
        scheduler.step_update(step)
        group_rates = {group["lr"] for group in optimizer.param_groups}
        assert len(group_rates) == 1  # decayed and undecayed groups move together
        rates.append(group_rates.pop())
    return optimizer, rates


def test_warmup_cosine_rises_linearly_peaks_at_the_base_rate_and_decays_to_min_lr():
    _, rates = _scheduled()
    assert rates[0] == 0.0
    assert rates[5] == pytest.approx(5e-4)
    assert rates[1:11] == sorted(rates[1:11]) and rates[9] < rates[10]
    assert rates[10] == pytest.approx(1e-3) and max(rates) == pytest.approx(1e-3)
    assert rates[100] == pytest.approx(1e-5)
    after = rates[10:]
    assert all(a >= b for a, b in zip(after, after[1:]))
    assert after[0] > after[len(after) // 2] > after[-1]
    assert rates[55] == pytest.approx(1e-5 + 0.5 * (1e-3 - 1e-5))  # halfway down the cosine


def test_adamw_decays_matrices_and_tokens_but_not_norms_and_biases():
    model = MaskedAutoencoder(MAESettings("micro", image_size=32, patch_size=4))
    optimizer = adamw(model, 1e-3, 0.05, (0.9, 0.95))
    decay_of = {id(p): group["weight_decay"] for group in optimizer.param_groups for p in group["params"]}
    assert all(group["betas"] == (0.9, 0.95) for group in optimizer.param_groups)
    names = dict(model.named_parameters())
    assert len(decay_of) == len(names)  # every parameter is in exactly one group
    for name, parameter in names.items():
        expected = 0.0 if parameter.ndim <= 1 else 0.05
        assert decay_of[id(parameter)] == expected, name
    for name in (
        "cls_token.weight",
        "mask_token.weight",
        "patch_embed.proj.weight",
        "blocks.0.attn.qkv.weight",
        "decoder_pred.weight",
    ):
        assert decay_of[id(names[name])] == 0.05, name
    for name in ("norm.weight", "norm.bias", "blocks.0.norm1.weight", "blocks.0.attn.qkv.bias", "decoder_embed.bias"):
        assert decay_of[id(names[name])] == 0.0, name
