"""Shared data and runs for the pre-training tests (a helper module, not a conftest: a second
conftest.py would replace the `conftest` module that tests import `run_dpvip` from).

Everything is built once per session under pytest's base temporary folder; the fixtures
below may be imported by several test modules and then find the folder already built.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
import torch
import yaml
from conftest import write_synthetic_index

from dpvip.synthetic.family import thread_invariant
from dpvip.synthetic.shards import shard_name

IMAGES, SHARD_SIZE = 512, 128
# 2 epochs of 8 steps (batch 64 of 512 images); warm-up over half an epoch.
SETTINGS = {
    "image_size": 32,
    "patch_size": 4,
    "epochs": 2,
    "batch_size": 64,
    "blr": 1.5e-3,
    "warmup_epochs": 0.5,
    "log_every": 1,
}
STEPS = 16
SIZE = "micro"


def one_thread():
    """Train on one CPU thread. The runs are tiny; with two threads, torch's OpenMP workers
    spin-wait and a run takes ten times longer whenever another process uses a core."""
    return thread_invariant(torch.device("cpu"))


@pytest.fixture
def single_thread():
    with one_thread():
        yield


def _cached(tmp_path_factory, name: str) -> tuple[Path, bool]:
    """(folder under the session's base temp, whether it is already complete)."""
    folder = tmp_path_factory.getbasetemp() / name
    return folder, (folder / ".complete").exists()


def _complete(folder: Path) -> None:
    (folder / ".complete").write_text("")


def generate_shaders(out: Path, images: int, resolution: int, shard_size: int, seed: int = 0) -> Path:
    return write_synthetic_index(out, "shaders", images, resolution, shard_size, seed, {"programs": 32})


@pytest.fixture(scope="session")
def shaders_index(tmp_path_factory) -> Path:
    """index.json of 512 shader images at 32 px in 4 shards of 128."""
    folder, done = _cached(tmp_path_factory, "shaders-512-32")
    if not done:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        generate_shaders(folder, IMAGES, 32, SHARD_SIZE)
        _complete(folder)
    return folder / "index.json"


def write_index(folder: Path, shards: list[tuple[str, int]]) -> Path:
    """An index.json in the form the reader expects: {"shards": [{"file", "samples"}]}."""
    index = {
        "shards": [{"file": name, "samples": count} for name, count in shards],
        "total_samples": sum(c for _, c in shards),
    }
    (folder / "index.json").write_text(json.dumps(index))
    return folder / "index.json"


@pytest.fixture(scope="session")
def one_shard_index(shaders_index, tmp_path_factory) -> Path:
    """The first 128 images only (a quick dataset)."""
    folder, done = _cached(tmp_path_factory, "shaders-128-32")
    if not done:
        folder.mkdir(exist_ok=True)
        shutil.copyfile(shaders_index.parent / shard_name(0), folder / shard_name(0))
        write_index(folder, [(shard_name(0), SHARD_SIZE)])
        _complete(folder)
    return folder / "index.json"


CORRUPT_KEY = "000000005"


@pytest.fixture(scope="session")
def corrupt_index(shaders_index, tmp_path_factory) -> Path:
    """The first shard with sample 5's png replaced by bytes that are not an image."""
    folder, done = _cached(tmp_path_factory, "shaders-128-32-corrupt")
    if not done:
        folder.mkdir(exist_ok=True)
        with (
            tarfile.open(shaders_index.parent / shard_name(0)) as source,
            tarfile.open(folder / "corrupt.tar", "w") as sink,
        ):
            for member in source:
                data = source.extractfile(member).read()
                if member.name == f"{CORRUPT_KEY}.png":
                    data = b"this is not a png" * 20
                copy = tarfile.TarInfo(member.name)
                copy.size, copy.mtime = len(data), 0
                sink.addfile(copy, io.BytesIO(data))
        write_index(folder, [("corrupt.tar", SHARD_SIZE)])
        _complete(folder)
    return folder / "index.json"


def settings_file(folder: Path, **changes) -> Path:
    path = folder / "settings.yaml"
    path.write_text(yaml.safe_dump(SETTINGS | changes))
    return path


@pytest.fixture(scope="session")
def reference_run(shaders_index, tmp_path_factory) -> Path:
    """The uninterrupted one-process run of SETTINGS, through `dpvip pretrain mae --procs 1`
    (in this process: the command runs the same code a subprocess would)."""
    from dpvip.cli import main

    folder, done = _cached(tmp_path_factory, "reference-run")
    if not done:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        settings = settings_file(folder)
        with one_thread():
            code = main(
                [
                    "pretrain",
                    "mae",
                    "--settings",
                    str(settings),
                    "--size",
                    SIZE,
                    "--data",
                    str(shaders_index),
                    "--out",
                    str(folder / "run"),
                    "--procs",
                    "1",
                ]
            )
        assert code == 0
        _complete(folder)
    return folder / "run"


def crash_on_call(monkeypatch, training_class, calls: int, error: type[BaseException] = RuntimeError) -> None:
    """`training_class.train_step` raises on call number `calls` (before updating)."""
    original, count = training_class.train_step, [0]

    def train_step(self, *args):
        count[0] += 1
        if count[0] == calls:
            raise error("simulated crash")
        return original(self, *args)

    monkeypatch.setattr(training_class, "train_step", train_step)


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "model.pt", weights_only=True)["model"]


def record(run_dir: Path) -> dict:
    return torch.load(run_dir / "model.pt", weights_only=True)["record"]


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


def assert_identical(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, (
        f"{len(different)} tensors differ, e.g. {different[:3]} (max |diff| {max_difference(a, b):.3g})"
    )
