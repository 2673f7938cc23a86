"""Mehta et al.'s heads with a validation share held out of the cached training split
(`dpvip.selection`, `dp_transfer.mehta.selection`): the cut is disjoint from what trains, the
same for every view, of the configured size; the head trains on the rest only (its privacy
ledger counts those examples), is scored on the held-out share as on test, and the study's
result records how its cells choose their learning rate."""

from __future__ import annotations

import json

import pytest
import torch

from dpvip.plan.transfer import VALIDATION_PRIVACY
from dpvip.plan.transfer_runs import FeatureSet, Run
from dpvip.selection import validation_split
from dpvip.transfer import jobs
from dpvip.transfer.cache import FeatureCache
from dpvip.transfer.head import HeadSettings, train_head
from dpvip.transfer.rows import TensorRows

pytestmark = pytest.mark.usefixtures("torch_one_thread")

N, WIDTH, CLASSES, VIEWS = 80, 6, 4, 2
TRAIN = torch.randn(VIEWS, N, WIDTH, generator=torch.Generator().manual_seed(0))
LABELS = torch.arange(N) % CLASSES
TRAIN += 3 * torch.eye(CLASSES, WIDTH)[LABELS]
TEST = TRAIN[0, :24] + 0.1
VALIDATION = {"fraction": 0.25, "seed": 2, "stratified": False}
HEAD = {"optimizer": "adam", "lr": 0.1, "batch_fraction": 1.0, "epochs": 2, "epsilon": 8.0, "delta": 1e-5}
HEAD |= {"accountant": "rdp", "randomness": "seeded", "micro_batch": 16, "seed": 0}


def cached() -> FeatureCache:
    train = [TensorRows(view) for view in TRAIN]
    return FeatureCache(train, LABELS, TensorRows(TEST), LABELS[:24], CLASSES, {})


def test_the_held_out_share_is_disjoint_of_the_configured_size_and_one_cut_for_every_view():
    train, labels, (held, held_labels) = jobs.held_out(cached().train, LABELS, VALIDATION)
    kept, cut = validation_split(LABELS.numpy(), 0.25, 2, stratified=False)
    assert len(held) == len(cut) == 20 and len(labels) == len(kept) == 60
    assert not set(kept) & set(cut) and sorted([*kept, *cut]) == list(range(N))
    for view, rows in enumerate(train):
        assert torch.equal(rows.read(0, len(rows)), TRAIN[view, kept])
    assert torch.equal(held.read(0, 20), TRAIN[0, cut]) and torch.equal(held_labels, LABELS[cut])
    assert torch.equal(labels, LABELS[kept])


def test_a_head_with_a_validation_setting_trains_on_the_rest_and_is_scored_on_the_share():
    run = Run("head", "row", "col", FeatureSet("tiny", "blobs", "prelogits", 2), HEAD | {"validation": VALIDATION})
    result = jobs._train(run, cached(), None, None, False)
    kept, cut = validation_split(LABELS.numpy(), 0.25, 2, stratified=False)
    alone = train_head(
        TRAIN[:, kept],
        LABELS[kept],
        TEST,
        LABELS[:24],
        CLASSES,
        HeadSettings(**HEAD),
        validation=(TRAIN[0, cut], LABELS[cut]),
    )
    assert result["privacy"]["examples"] == 60  # the ledger's n: the rows the head trained on
    assert result["validation_examples"] == 20
    assert (result["accuracy"], result["validation_accuracy"]) == (alone["accuracy"], alone["validation_accuracy"])
    assert result["validation_accuracy"] > 50  # chance: 25%
    whole = jobs._train(Run("head", "row", "col", run.features, HEAD), cached(), None, None, False)
    assert whole["privacy"]["examples"] == N and "validation_accuracy" not in whole  # test mode: the whole split


def test_a_study_records_its_selection(tmp_path, monkeypatch):
    features = FeatureSet("tiny", "blobs", "prelogits", 2)
    runs = [Run("head", "row", "col", features, HEAD | {"validation": VALIDATION, "lr": lr}) for lr in (0.1, 1.0)]
    monkeypatch.setattr("dpvip.transfer.cache.cache_digest", lambda meta: "digest")
    monkeypatch.setattr("dpvip.transfer.cache.cache_meta", lambda folder: {})
    monkeypatch.setattr("dpvip.transfer.cache.open_cache", lambda folder: cached())
    monkeypatch.setattr(jobs, "_summary", lambda folder: {})
    selection = {"mode": "validation", **VALIDATION, "privacy": VALIDATION_PRIVACY}
    out = tmp_path / "study.json"
    jobs.run_study("study", runs, {features.path: tmp_path}, out, progress=False, selection=selection)
    result = json.loads(out.read_text())
    assert result["selection"] == selection
    # each run scored on the same 20 held-out rows (a quarter of 80): whole counts of 20
    correct = [run["result"]["validation_accuracy"] * 20 / 100 for run in result["runs"]]
    assert [round(n) for n in correct] == pytest.approx(correct) and all(0 <= n <= 20 for n in correct), correct
    assert result["runs"][0]["result"]["privacy"]["examples"] == 60
