"""Bounded memory: a feature cache is written and read a batch at a time, so the peak resident
memory of a study's run (a Mehta et al. head, DP-RandP's private probe with its centring
statistics) does not grow with the number of cached rows. Each run is a fresh subprocess on a
generated float16 cache of 20,000 or 80,000 rows x 512 dims; a run that loads the cache whole
(`load_cache`, float32) is measured the same way, to show that the check can fail."""

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
MARGIN = 0.15  # of the larger cache's bytes: what peak RSS may grow by from the smaller to the larger
LARGER_CACHE_BYTES = SIZES[1] * WIDTH * 2  # float16

# The runs as the study job runs them (`dpvip.transfer.jobs._train`), 2 steps each, in one
# process per cache and run (what one run leaves mapped or retained must not hide or inflate the
# next one's): after the imports, the peak resident set (VmHWM) is reset (/proc/self/clear_refs)
# and read after the run. "whole" is the head on `load_cache`'s tensors.
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
measured = {}
for kind in sys.argv[2:]:
    open("/proc/self/clear_refs", "w").write("5")  # VmHWM := VmRSS
    start = status("VmRSS")
    cache = load_cache(sys.argv[1]) if kind == "whole" else open_cache(sys.argv[1])
    if kind == "probe":
        result = train_probe(cache.train[0], cache.train_labels, cache.test, cache.test_labels, cache.classes, probe)
    else:
        result = train_head(cache.train, cache.train_labels, cache.test, cache.test_labels, cache.classes, head)
    del cache
    measured[kind] = {"start": start, "peak": status("VmHWM"), "accuracy": result["accuracy"]}
print(json.dumps(measured))
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
    for n in SIZES:
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
    return {n: folder / str(n) for n in SIZES}


@pytest.fixture(scope="module")
def measured(caches) -> dict[int, dict]:
    """Per cache size and run: RSS at its start, its peak, its accuracy."""
    found = {}
    for n, folder in caches.items():
        found[n] = {}
        for kind in ("head", "probe", "whole"):
            command = [sys.executable, "-c", RUNS, str(folder), kind]
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stderr
            found[n] |= json.loads(done.stdout.splitlines()[-1])
    for kind in found[SIZES[0]]:
        print(kind, {n: f"peak {runs[kind]['peak'] / 2**20:.1f} MiB" for n, runs in found.items()})
    return found


def growth(measured: dict[int, dict], kind: str) -> int:
    """How much more the run's resident set rose (peak over its start) on the larger cache."""
    rise = {n: runs[kind]["peak"] - runs[kind]["start"] for n, runs in measured.items()}
    return rise[SIZES[1]] - rise[SIZES[0]]


@pytest.mark.parametrize("kind", ["head", "probe"])
def test_peak_memory_does_not_grow_with_the_cached_rows(measured, kind):
    assert growth(measured, kind) < MARGIN * LARGER_CACHE_BYTES, f"{kind}: peak RSS grew by {growth(measured, kind)} B"
    assert all(runs[kind]["accuracy"] > 50 for runs in measured.values())  # they learned (chance: 10%)


def test_loading_the_cache_whole_fails_the_check(measured):
    """The control: in memory as float32, 60,000 more rows x 512 dims are 117 MiB more."""
    assert growth(measured, "whole") > MARGIN * LARGER_CACHE_BYTES
    assert growth(measured, "whole") > 0.8 * (SIZES[1] - SIZES[0]) * WIDTH * 4
