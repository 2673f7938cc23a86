"""The disk memo: an answer computed once across processes, keyed by the code, off on demand."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dpvip import memo

SOURCES, LIBRARIES = ("privacy/accounting.py", "privacy/gaussian.py"), ("numpy", "scipy")

CALLS: list[tuple] = []


def _count(*args):
    CALLS.append(args)
    return sum(args)


@pytest.fixture
def fresh_memo(tmp_path, monkeypatch):
    monkeypatch.setenv(memo.ENVIRONMENT, str(tmp_path / "memo"))
    memo._memory.cache_clear()
    CALLS.clear()
    yield tmp_path / "memo"
    memo._memory.cache_clear()


def test_an_answer_is_computed_once_and_kept_on_disk(fresh_memo):
    counted = memo.memoised("test", SOURCES, LIBRARIES)(_count)
    assert counted(1, 2.5) == 3.5
    assert counted(1, 2.5) == 3.5
    assert counted(2, 2.5) == 4.5
    assert CALLS == [(1, 2.5), (2, 2.5)]
    counted.cache_clear()  # a new process: nothing in memory, the disk still knows
    assert counted(1, 2.5) == 3.5
    assert CALLS == [(1, 2.5), (2, 2.5)]
    assert (fresh_memo / "test" / memo.fingerprint(SOURCES, LIBRARIES)).is_dir()


def test_keyword_and_positional_calls_share_an_answer(fresh_memo):
    def scaled(value, factor=2.0):
        CALLS.append((value, factor))
        return value * factor

    counted = memo.memoised("test", SOURCES, LIBRARIES)(scaled)
    assert counted(3.0) == counted(3.0, factor=2.0) == counted(value=3.0) == 6.0
    assert CALLS == [(3.0, 2.0)]


def test_off_computes_every_time(tmp_path, monkeypatch):
    monkeypatch.setenv(memo.ENVIRONMENT, "off")
    memo._memory.cache_clear()
    CALLS.clear()
    counted = memo.memoised("test", SOURCES, LIBRARIES)(_count)
    counted(1, 1)
    counted.cache_clear()
    counted(1, 1)
    assert len(CALLS) == 2
    memo._memory.cache_clear()


def test_a_folder_that_cannot_be_made_turns_the_memo_off_with_a_warning(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(memo.ENVIRONMENT, str(blocker / "memo"))
    memo._memory.cache_clear()
    CALLS.clear()
    with pytest.warns(UserWarning, match="test memo off: cannot create"):
        assert memo.memoised("test", SOURCES, LIBRARIES)(_count)(1, 1) == 2
    memo._memory.cache_clear()


def test_the_fingerprint_follows_the_code_and_library_versions():
    assert memo.fingerprint(SOURCES, LIBRARIES) == memo.fingerprint(SOURCES, LIBRARIES)
    assert memo.fingerprint(SOURCES, LIBRARIES[:1]) != memo.fingerprint(SOURCES, LIBRARIES)
    assert memo.fingerprint(SOURCES[:1], LIBRARIES) != memo.fingerprint(SOURCES, LIBRARIES)


@pytest.mark.slow
def test_a_second_process_reads_the_first_ones_calibration(tmp_path):
    """The calibration a DP job makes is what the next job (or the audit) reads, unchanged."""
    program = (
        "import time, json; from dpvip.privacy.accounting import noise_multiplier;"
        "start = time.perf_counter(); c = noise_multiplier(256 / 1437, 24, 1.0, 1e-5, 'prv');"
        "print(json.dumps([c.noise_multiplier, c.epsilon, time.perf_counter() - start]))"
    )
    env = {memo.ENVIRONMENT: str(tmp_path / "memo"), "PATH": "/usr/bin:/bin"}
    outputs = [
        subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    ]
    first, second = (json.loads(line) for line in outputs)  # the first computed, the second read
    assert first[:2] == second[:2]
    assert 0.99 <= first[1] <= 1.0  # calibrated to the budget, never over it
    assert len(list((tmp_path / "memo").rglob("*.pkl"))) >= 1
