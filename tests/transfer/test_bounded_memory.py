"""Bounded memory: a feature cache is written and read a batch at a time, so the peak resident
memory of a study's run (a Mehta et al. head, DP-RandP's private probe with its centring
statistics) does not grow with the number of cached rows. Each run is a fresh subprocess on a
generated float16 cache of 20,000 or 80,000 rows x 512 dims; a run that loads the cache whole
(`load_cache`, float32) is measured the same way, to show that the check can fail.

Noise in such a measurement only ever adds memory (library pages and lazy imports brought in
during the run, what the machine's page cache and allocator happen to do), while a run whose
memory grows with the rows grows in every process. So each process first does the same run on
a small warm-up cache (what it imports and pages in is then in place, and what it retains is
too small to hide a larger run's growth), and a run whose growth passes the margin is measured
again in fresh processes, up to `REPEATS` times, keeping the least: once on CI a probe run rose
by 101 MB on the larger cache where it rose by 0.4 MiB in every run here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dpvip.transfer.cache import cache_features

pytestmark = pytest.mark.slow

WIDTH, CLASSES, TEST_ROWS, SHARD = 512, 10, 1000, 16384
SIZES = (20_000, 80_000)
WARM_UP = 2_000  # rows of the cache each process runs on before it is measured
REPEATS = 3  # processes per (cache, run) at most; the least growth counts
MARGIN = 0.15  # of the larger cache's bytes: what peak RSS may grow by from the smaller to the larger
LARGER_CACHE_BYTES = SIZES[1] * WIDTH * 2  # float16

# The runs as the study job runs them (`dpvip.transfer.jobs._train`), 2 steps each, in one
# process per cache and run (what one run leaves mapped or retained must not hide or inflate the
# next one's): after the imports and the same run on the warm-up cache, the peak resident set
# (VmHWM) is reset (/proc/self/clear_refs) and read after the run. "whole" is the head on
# `load_cache`'s tensors.
RUNS = """
import json, re, sys
import torch
from dpvip.transfer.cache import load_cache, open_cache
from dpvip.transfer.head import HeadSettings, train_head
from dpvip.transfer.private_probe import PrivateProbeSettings, train_probe

def status(key):
    return 1024 * int(re.search(key + r":\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))

torch.set_num_threads(1)
common = {"delta": 1e-6, "randomness": "seeded", "micro_batch": 4096}
head = HeadSettings(optimizer="adam", lr=0.01, batch_fraction=0.5, epochs=1.0, epsilon=4.0, **common)
probe = PrivateProbeSettings(epsilon=4.0, steps=2, lr=1.0, feature_norm=1.0, sigma_ratio=1.5, **common)

def run(folder, kind):
    cache = load_cache(folder) if kind == "whole" else open_cache(folder)
    if kind == "probe":
        return train_probe(cache.train[0], cache.train_labels, cache.test, cache.test_labels, cache.classes, probe)
    return train_head(cache.train, cache.train_labels, cache.test, cache.test_labels, cache.classes, head)

warm_up, folder, kind = sys.argv[1:]
run(warm_up, kind)
open("/proc/self/clear_refs", "w").write("5")  # VmHWM := VmRSS
start = status("VmRSS")
result = run(folder, kind)
print(json.dumps({"start": start, "peak": status("VmHWM"), "accuracy": result["accuracy"]}))
"""


class Generated:
    """A stand-in dataset whose 'images' are their indices (the extractor makes features)."""

    def __init__(self, n: int):
        self.name, self.classes, self.labels = "generated", CLASSES, torch.arange(n) % CLASSES

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, indices: torch.Tensor):
        return type("Batch", (), {"images": indices})


def features(indices: torch.Tensor) -> torch.Tensor:
    """Noise around a class centre, drawn from the batch's first index (deterministic)."""
    noise = torch.randn(len(indices), WIDTH, generator=torch.Generator().manual_seed(int(indices[0])))
    centres = torch.randn(CLASSES, WIDTH, generator=torch.Generator().manual_seed(99))
    return noise + 2 * centres[indices % CLASSES]


@pytest.fixture(scope="module")
def caches(tmp_path_factory) -> dict[int, Path]:
    folder = tmp_path_factory.mktemp("caches")
    for n in (WARM_UP, *SIZES):
        cache_features(
            features,
            Generated(n),
            Generated(TEST_ROWS),
            folder / str(n),
            fingerprint={"rows": n},
            batch_size=4096,
            shard_size=SHARD,
            dtype="float16",
            progress=False,
        )
    return {n: folder / str(n) for n in (WARM_UP, *SIZES)}


def measure(caches: dict[int, Path], n: int, kind: str) -> dict:
    """One process's run of `kind` on the cache of n rows: RSS at its start, its peak, its accuracy."""
    command = [sys.executable, "-c", RUNS, str(caches[WARM_UP]), str(caches[n]), kind]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def growth(measured: dict[int, dict], kind: str) -> int:
    """How much more the run's resident set rose (peak over its start) on the larger cache."""
    rise = {n: runs[kind]["peak"] - runs[kind]["start"] for n, runs in measured.items()}
    return rise[SIZES[1]] - rise[SIZES[0]]


@pytest.fixture(scope="module")
def measured(caches) -> dict[str, list[dict[int, dict]]]:
    """Per run: its measurements (per cache size: RSS at its start, its peak, its accuracy),
    one more while its growth passes the margin, `REPEATS` at most."""
    found = {}
    for kind in ("head", "probe", "whole"):
        found[kind] = []
        while len(found[kind]) < REPEATS and (
            not found[kind] or growth(found[kind][-1], kind) >= MARGIN * LARGER_CACHE_BYTES
        ):
            found[kind].append({n: {kind: measure(caches, n, kind)} for n in SIZES})
        print(kind, [f"+{growth(each, kind) / 2**20:.1f} MiB" for each in found[kind]])
    return found


def least_growth(measured: dict[str, list[dict[int, dict]]], kind: str) -> int:
    return min(growth(each, kind) for each in measured[kind])


@pytest.mark.parametrize("kind", ["head", "probe"])
def test_peak_memory_does_not_grow_with_the_cached_rows(measured, kind):
    least = least_growth(measured, kind)
    assert least < MARGIN * LARGER_CACHE_BYTES, f"{kind}: peak RSS grew by {least} B in each of {REPEATS} processes"
    # they learned (chance: 10%)
    assert all(runs[kind]["accuracy"] > 50 for each in measured[kind] for runs in each.values())


def test_loading_the_cache_whole_fails_the_check(measured):
    """The control: in memory as float32, 60,000 more rows x 512 dims are 117 MiB more, in
    every one of the `REPEATS` processes."""
    assert len(measured["whole"]) == REPEATS
    assert least_growth(measured, "whole") > MARGIN * LARGER_CACHE_BYTES
    assert least_growth(measured, "whole") > 0.8 * (SIZES[1] - SIZES[0]) * WIDTH * 4
