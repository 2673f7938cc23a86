"""A DP run's randomness (dpvip.privacy.randomness): a secret key made once per run, mode
0600, read back on resume, independent between runs; seeded keys reproducible and labelled
not private; keyed derivations that differ by purpose, numbers and run."""

from __future__ import annotations

import multiprocessing
import stat

import numpy as np
import pytest

from dpvip.errors import DpvipInputError
from dpvip.privacy.randomness import KEY_BYTES, KEY_FILE, NOT_PRIVATE, RunRandomness


def test_the_secret_key_is_made_once_with_mode_0600_and_read_back(tmp_path):
    first = RunRandomness.secret(tmp_path / "work")
    key_file = tmp_path / "work" / KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert len(key_file.read_bytes()) == KEY_BYTES == 32
    again = RunRandomness.secret(tmp_path / "work")  # a resume
    assert again.seed("noise", 3) == first.seed("noise", 3) and again.private
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == [KEY_FILE]  # no temporary left behind


def test_two_runs_get_independent_keys(tmp_path):
    one, two = RunRandomness.secret(tmp_path / "a"), RunRandomness.secret(tmp_path / "b")
    assert one.seed("noise", 0) != two.seed("noise", 0)
    assert (tmp_path / "a" / KEY_FILE).read_bytes() != (tmp_path / "b" / KEY_FILE).read_bytes()


def _key_of(folder: str) -> int:
    return RunRandomness.secret(folder).seed("noise", 0)


def test_racing_first_starts_agree_on_one_key(tmp_path):
    """Ranks of one run starting together (one creates, the others read) share the key."""
    with multiprocessing.get_context("fork").Pool(4) as pool:
        seeds = pool.map(_key_of, [str(tmp_path / "work")] * 8)
    assert len(set(seeds)) == 1


def test_a_damaged_key_is_refused(tmp_path):
    (tmp_path / KEY_FILE).write_bytes(b"short")
    with pytest.raises(DpvipInputError, match="holds 5 bytes"):
        RunRandomness.secret(tmp_path)


def test_seeded_keys_follow_the_seed_and_say_they_are_not_private():
    assert RunRandomness.seeded(3).seed("noise", 1) == RunRandomness.seeded(3).seed("noise", 1)
    assert RunRandomness.seeded(3).seed("noise", 1) != RunRandomness.seeded(4).seed("noise", 1)
    assert RunRandomness.seeded(3).record() == {"randomness": "seeded", "private": False, "note": NOT_PRIVATE}
    assert "NOT PRIVATE" in NOT_PRIVATE


def test_derivations_differ_by_purpose_numbers_and_run(tmp_path):
    key = RunRandomness.secret(tmp_path)
    seeds = {key.seed(purpose, step) for purpose in ("noise", "inclusion", "example") for step in range(50)}
    assert len(seeds) == 150 and all(0 <= s < 2**63 for s in seeds)
    # numbers are length-prefixed: (1, 23) and (12, 3) are different inputs
    assert key.seed("inclusion", 1, 23) != key.seed("inclusion", 12, 3)
    assert key.entropy("inclusion", 0, 0).bit_length() > 200  # numpy takes all 256 bits
    runs = {key.child({"run": name}).seed("noise", 0) for name in "abc"}
    assert len(runs) == 3 and key.child({"run": "a"}).seed("noise", 0) == key.child({"run": "a"}).seed("noise", 0)
    np.random.default_rng(key.entropy("inclusion", 0, 0)).random(3)  # a valid numpy seed


def test_for_run_needs_a_work_folder_for_a_secret_and_knows_the_modes(tmp_path):
    with pytest.raises(DpvipInputError, match="needs a private work folder"):
        RunRandomness.for_run("secret", None, 0, {})
    with pytest.raises(DpvipInputError, match="privacy.randomness 'public' is not one of secret, seeded"):
        RunRandomness.for_run("public", tmp_path, 0, {})
    seeded = RunRandomness.for_run("seeded", None, 5, {"a": 1})
    assert seeded.seed("noise", 0) == RunRandomness.seeded(5).child({"a": 1}).seed("noise", 0)
    assert not (tmp_path / KEY_FILE).exists()


def test_the_key_never_shows_in_its_text(tmp_path):
    key = RunRandomness.secret(tmp_path)
    secret = (tmp_path / KEY_FILE).read_bytes()
    shown = repr(key) + str(key) + repr(key.record())
    assert secret.hex() not in shown and "secret" in shown
