"""Shared fixtures: the repository root and a runner for the `dpvip` command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture
def torch_one_thread():
    """Run a test on one torch thread (two spin-wait when another process holds a core)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def run_dpvip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dpvip.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=600
    )


def dpvip_json(*args: str) -> dict:
    done = run_dpvip(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def linear_paths(monkeypatch):
    """Spy on the Linear rule: layer -> the weight path taken ('ghost' or 'formed')."""
    seen = {}
    from dpvip.privacy import clipping

    original = clipping._linear_squared_norms

    def spy(layer, call):
        squared = original(layer, call)
        if "weight" in call.parts:
            seen[layer] = call.parts["weight"][0]
        return squared

    monkeypatch.setattr(clipping, "_linear_squared_norms", spy)
    return seen
