"""Resumable DP transfer runs: a Mehta et al. head and DP-RandP's private probe stopped by
SIGTERM (at the end of a step, or between two micro-batches of one), or crashed after a
periodic save, resume from their state in the private work folder, with the same secret key
and ledger, to the bits of an uninterrupted run; a study job resumes the interrupted run and
does not redo a finished one."""

from __future__ import annotations

import json
import math
import os
import signal
from dataclasses import asdict, replace

import pytest
import torch

from dpvip.errors import DpvipInputError
from dpvip.plan.transfer_runs import FeatureSet, Run
from conftest import share_key
from dpvip.privacy.randomness import RunRandomness, key_path
from dpvip.transfer import jobs
from dpvip.transfer.cache import cache_features
from dpvip.transfer.head import HeadSettings, train_head
from dpvip.transfer.private_probe import PrivateProbeSettings, train_probe
from dpvip.train.resume import LoopState
from dpvip.transfer.rows import Rows, ShardedRows, TensorRows

# keep_keys: runs compared with one key share it after the first has ended
pytestmark = pytest.mark.usefixtures("torch_one_thread", "keep_keys")

N, WIDTH, CLASSES, VIEWS = 60, 6, 3, 2
GENERATOR = torch.Generator().manual_seed(0)
TRAIN = torch.randn(VIEWS, N, WIDTH, generator=GENERATOR) + 2 * torch.eye(CLASSES, WIDTH)[torch.arange(N) % CLASSES]
LABELS = torch.arange(N) % CLASSES
TEST = TRAIN[0, :20] + 0.1
HEAD = HeadSettings(
    optimizer="lamb", lr=0.05, batch_fraction=0.5, epochs=2, epsilon=4.0, delta=1e-5, accountant="rdp", micro_batch=8
)
PROBE = PrivateProbeSettings(
    epsilon=4.0, delta=1e-5, steps=4, lr=2.0, feature_norm=3.0, sigma_ratio=1.5, micro_batch=16
)


class Reads:
    """Counts the reads of some rows; at read `at` sends this process SIGTERM or (crash) raises."""

    def __init__(self, at: int | None = None, crash: bool = False):
        self.count, self.at, self.crash = 0, at, crash

    def __call__(self) -> None:
        self.count += 1
        if self.count == self.at:
            if self.crash:
                raise RuntimeError("node lost")
            os.kill(os.getpid(), signal.SIGTERM)  # the job's LoopState turns it into a stop request


class Counted(Rows):
    def __init__(self, rows: Rows, reads: Reads):
        super().__init__(*rows.shape)
        self.rows, self.reads = rows, reads

    def read(self, start, stop, widen=True):
        self.reads()
        return self.rows.read(start, stop, widen)

    def take(self, indices, widen=True):
        self.reads()
        return self.rows.take(indices, widen)


def run(kind: str, work, reads: Reads, state_path=None, every: int = 100, epsilon: float = 4.0) -> dict:
    """One run on rows that count their reads, with the key in `work` and, given a path, a
    state there (cleared once the result exists, as the study job does); its settings are in
    the state's fingerprint, as a study job's are."""
    randomness = RunRandomness.secret(work)
    settings = replace(HEAD if kind == "head" else PROBE, epsilon=epsilon)
    with LoopState(state_path, {"kind": kind, "settings": asdict(settings)}, every) as state:
        if kind == "head":
            train = [Counted(TensorRows(view), reads) for view in TRAIN]
            result = train_head(train, LABELS, TEST, LABELS[:20], CLASSES, settings, None, randomness, state)
        else:
            train = Counted(TensorRows(TRAIN[0]), reads)
            result = train_probe(train, LABELS, TEST, LABELS[:20], CLASSES, settings, randomness, None, state)
        state.clear()
    return result


@pytest.fixture
def weights(monkeypatch) -> list[torch.Tensor]:
    """The weights of every head or probe trained, as fit_head and fit_probe return them."""
    import dpvip.transfer.head as head
    import dpvip.transfer.private_probe as probe

    trained = []
    for module, name in ((head, "fit_head"), (probe, "fit_probe")):

        def keep(*args, _fit=getattr(module, name), **kwargs):
            fitted = _fit(*args, **kwargs)
            trained.append(fitted[0].weight.detach().clone())
            return fitted

        monkeypatch.setattr(module, name, keep)
    return trained


def comparable(result: dict) -> dict:
    """The result without its timings."""
    return {key: value for key, value in result.items() if not key.endswith("seconds")}


def reads_per_step(kind: str, whole: dict) -> tuple[int, list[int]]:
    """(reads before the first step, reads of each step)."""
    if kind == "head":
        return 0, [math.ceil(size / HEAD.micro_batch) for size in whole["batch_sizes"]]
    per_pass = math.ceil(N / PROBE.micro_batch)
    return per_pass, [per_pass] * PROBE.steps  # the private mean's pass, then full-batch steps


@pytest.mark.parametrize("kind", ["head", "probe"])
@pytest.mark.parametrize("when", ["end of step 2", "inside step 2", "crash in step 3 after a save"])
def test_a_stopped_run_resumes_to_the_uninterrupted_result(tmp_path, kind, when, weights):
    work, path = tmp_path / "run.work", tmp_path / "run.work" / "state.pt"
    whole = run(kind, work, Reads())
    before, steps = reads_per_step(kind, whole)
    assert steps[1] >= 3, "step 2 has a micro-batch to stop before"
    if when == "end of step 2":
        at, saved_at = before + steps[0] + steps[1], 2  # the last read of step 2: the step completes
    elif when == "inside step 2":
        at, saved_at = before + steps[0] + 2, 1  # stopped before its third micro-batch
    else:
        at, saved_at = before + steps[0] + steps[1] + 1, 2  # saved every 2 steps; lost in step 3
    reads = Reads(at, crash=when.startswith("crash"))
    with pytest.raises(RuntimeError if reads.crash else SystemExit):
        run(kind, work, reads, path, every=2)
    state = torch.load(path, weights_only=True)
    assert state["step"] == saved_at and state["privacy"]["steps_done"] == saved_at  # the ledger of the state
    resumed = run(kind, work, Reads(), path, every=2)
    assert comparable(resumed) == comparable(whole)  # accuracy, ledger, batch sizes, train loss: the same bits
    assert len(weights) == 2 and torch.equal(weights[1], weights[0]) and weights[0].abs().sum() > 0
    assert not path.exists() and key_path(work).exists()


@pytest.mark.parametrize("kind", ["head", "probe"])
def test_a_state_of_another_mechanism_is_refused_naming_it(tmp_path, kind):
    """Rerun with another epsilon, the run's state differs in its fingerprint too (the
    settings); the ledger is checked first, so the refusal names the noise multiplier."""
    work, path = tmp_path / "run.work", tmp_path / "run.work" / "state.pt"
    before, steps = reads_per_step(kind, run(kind, work, Reads()))  # the same key: the same batches
    with pytest.raises(RuntimeError):  # in step 3, after the save at step 2
        run(kind, work, Reads(before + steps[0] + steps[1] + 1, crash=True), path, every=2)
    assert torch.load(path, weights_only=True)["step"] == 2
    with pytest.raises(DpvipInputError, match="trained with noise_multiplier .*would break its privacy accounting"):
        run(kind, work, Reads(), path, every=2, epsilon=2.0)


def test_sigterm_while_centring_stops_before_anything_is_saved(tmp_path):
    work, path = tmp_path / "work", tmp_path / "work" / "state.pt"
    whole = run("probe", work, Reads())
    with pytest.raises(SystemExit, match="while centring"):
        run("probe", work, Reads(at=2), path)
    assert not path.exists()
    assert comparable(run("probe", work, Reads(), path)) == comparable(whole)


def study(tmp_path, name: str, monkeypatch, sigterm_at: int | None = None, key=None):
    """A study of one head and one probe run on a float16 cache, its key copied from `key`;
    SIGTERM at read `sigterm_at` of the cache's rows. Returns (result, runs trained)."""
    cache = tmp_path / "cache"
    if not cache.exists():
        from dpvip.evaluate.datasets import LabelledImages

        images = TRAIN[0].view(N, 3, 1, 2)
        train, test = (
            LabelledImages(x, y, CLASSES, "blobs") for x, y in ((images, LABELS), (images[:20], LABELS[:20]))
        )
        cache_features(lambda x: x.flatten(1), train, test, cache, fingerprint={}, dtype="float16", progress=False)
    features = FeatureSet("tiny", "blobs", "prelogits", 2)
    head = {key: value for key, value in HEAD.__dict__.items()} | {"randomness": "secret"}
    probe = {key: value for key, value in PROBE.__dict__.items()} | {"randomness": "secret"}
    runs = [Run("head", "row", "head", features, head), Run("probe", "row", "probe", features, probe)]
    out = tmp_path / name / "study.json"
    out.parent.mkdir(exist_ok=True)
    if key is not None and not (out.parent / "study.work").exists():
        (out.parent / "study.work").mkdir()
        share_key(key, out.parent / "study.work")
    reads, trained = Reads(sigterm_at), []
    real_read, real_take, real_train = ShardedRows.read, ShardedRows.take, jobs._train

    def read(self, start, stop, widen=True):
        reads()
        return real_read(self, start, stop, widen)

    def take(self, indices, widen=True):
        reads()
        return real_take(self, indices, widen)

    def train(run, *args):
        trained.append(run.kind)
        return real_train(run, *args)

    monkeypatch.setattr(ShardedRows, "read", read)
    monkeypatch.setattr(ShardedRows, "take", take)
    monkeypatch.setattr(jobs, "_train", train)
    try:
        return jobs.run_study("study", runs, {features.path: cache}, out, progress=False), trained
    finally:
        monkeypatch.undo()


def test_a_study_stopped_in_its_second_run_resumes_it_and_skips_the_first(tmp_path, monkeypatch):
    whole, trained = study(tmp_path, "whole", monkeypatch)
    assert trained == ["head", "probe"]
    key = tmp_path / "whole" / "study.work"  # its key, kept (keep_keys)
    # the head's reads: 4 steps, then its train and test evaluations; then the probe's
    # centring pass and first step, and SIGTERM in its second step
    head_steps = sum(math.ceil(size / HEAD.micro_batch) for size in whole["runs"][0]["result"]["batch_sizes"])
    head_reads = head_steps + math.ceil(N / HEAD.micro_batch) + math.ceil(20 / HEAD.micro_batch)
    at = head_reads + 2 * math.ceil(N / PROBE.micro_batch) + 2
    with pytest.raises(SystemExit, match="stopped by SIGTERM"):
        study(tmp_path, "stopped", monkeypatch, sigterm_at=at, key=key)
    partial = tmp_path / "stopped" / "study.json.partial.jsonl"
    assert [json.loads(line)["kind"] for line in partial.read_text().splitlines()] == ["head"]
    states = list((tmp_path / "stopped" / "study.work").glob("probe_*.pt"))
    assert len(states) == 1 and torch.load(states[0], weights_only=True)["step"] == 1
    resumed, trained = study(tmp_path, "stopped", monkeypatch, key=key)
    assert trained == ["probe"]  # the finished head run is not redone
    strip = lambda result: [{**r, "result": comparable(r["result"])} for r in result["runs"]]  # noqa: E731
    assert strip(resumed) == strip(whole)
    assert not states[0].exists() and not partial.exists()


def test_a_study_stopped_while_a_run_is_scored_records_the_run_and_stops(tmp_path, monkeypatch):
    whole, _ = study(tmp_path, "whole", monkeypatch)
    key = tmp_path / "whole" / "study.work"  # its key, kept (keep_keys)
    head_steps = sum(math.ceil(size / HEAD.micro_batch) for size in whole["runs"][0]["result"]["batch_sizes"])
    at = head_steps + math.ceil(N / HEAD.micro_batch) + 1  # the head's first test batch, after its last step
    with pytest.raises(SystemExit, match="stopped by SIGTERM after the run"):
        study(tmp_path, "stopped", monkeypatch, sigterm_at=at, key=key)
    partial = tmp_path / "stopped" / "study.json.partial.jsonl"
    assert [json.loads(line)["kind"] for line in partial.read_text().splitlines()] == ["head"]
    assert not list((tmp_path / "stopped" / "study.work").glob("*.pt"))  # nothing left to resume
    resumed, trained = study(tmp_path, "stopped", monkeypatch, key=key)
    assert trained == ["probe"]
    assert [comparable(r["result"]) for r in resumed["runs"]] == [comparable(r["result"]) for r in whole["runs"]]
