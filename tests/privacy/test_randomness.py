"""A DP run's randomness (dpvip.privacy.randomness): a secret key made once per run in the key
store outside results/ (folder 0700, key 0600), read back on resume, refused when planted or
symlinked, deleted once the run is done; independent between runs; seeded keys reproducible
and labelled not private; keyed derivations that differ by purpose, numbers and run."""

from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from dpvip.errors import DpvipInputError
from dpvip.privacy.randomness import KEY_BYTES, NOT_PRIVATE, RunRandomness, key_path, key_store, release_key


def test_the_secret_key_is_made_once_with_mode_0600_in_the_key_store_and_read_back(tmp_path, key_store):
    first = RunRandomness.secret(tmp_path / "work")
    key_file = key_path(tmp_path / "work")
    assert key_file.is_relative_to(key_store) and first.created
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and stat.S_IMODE(key_store.stat().st_mode) == 0o700
    assert len(key_file.read_bytes()) == KEY_BYTES == 32
    again = RunRandomness.secret(tmp_path / "work")  # a resume
    assert again.seed("noise", 3) == first.seed("noise", 3) and again.private and not again.created
    assert sorted(p.name for p in key_file.parent.iterdir()) == [key_file.name]  # no temporary left behind
    assert not (tmp_path / "work").exists()  # nothing in the run's folder


def test_key_paths_mirror_the_run_folder_under_the_store(tmp_path, key_store, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert key_path("results/dp_pretrain/run/work") == key_store / "results/dp_pretrain/run/work.key"
    assert key_path(tmp_path / "results/x.work") == key_store / "results/x.work.key"
    assert key_path("/elsewhere/y.work") == key_store / "_absolute/elsewhere/y.work.key"


def test_two_runs_get_independent_keys(tmp_path):
    one, two = RunRandomness.secret(tmp_path / "a"), RunRandomness.secret(tmp_path / "b")
    assert one.seed("noise", 0) != two.seed("noise", 0)
    assert key_path(tmp_path / "a").read_bytes() != key_path(tmp_path / "b").read_bytes()


def _key_of(folder: str) -> int:
    return RunRandomness.secret(folder).seed("noise", 0)


def test_racing_first_starts_agree_on_one_key(tmp_path):
    """Ranks of one run starting together (one creates, the others read) share the key."""
    with multiprocessing.get_context("fork").Pool(4) as pool:
        seeds = pool.map(_key_of, [str(tmp_path / "work")] * 8)
    assert len(set(seeds)) == 1


def test_other_ranks_only_read_the_key_and_fail_clearly_without_it(tmp_path):
    """Ranks other than 0 never make a key: on a filesystem they do not share with rank 0
    they would otherwise draw other noise and batches than rank 0."""
    with pytest.raises(DpvipInputError, match="rank 0 makes it, so the key store .* every rank shares"):
        RunRandomness.secret(tmp_path / "work", create=False)
    assert not key_path(tmp_path / "work").exists()
    made = RunRandomness.secret(tmp_path / "work")
    assert RunRandomness.secret(tmp_path / "work", create=False).seed("noise", 0) == made.seed("noise", 0)


def _key_folder(work) -> Path:
    """The folder of `work`'s key, made as a user might (default modes), the store 0700."""
    path = key_path(work)
    path.parent.mkdir(parents=True, exist_ok=True)
    key_store().chmod(0o700)
    return path


def _planted(tmp_path, mode: int) -> None:
    path = _key_folder(tmp_path / "work")
    path.write_bytes(os.urandom(KEY_BYTES))
    path.chmod(mode)


def test_a_planted_key_readable_by_others_is_refused(tmp_path):
    _planted(tmp_path, 0o644)
    with pytest.raises(DpvipInputError, match="refused: a key must be a regular file of this user with mode 0600"):
        RunRandomness.secret(tmp_path / "work")


def test_a_symlinked_key_is_refused_not_followed(tmp_path):
    target = tmp_path / "elsewhere.key"
    target.write_bytes(os.urandom(KEY_BYTES))
    target.chmod(0o600)
    path = _key_folder(tmp_path / "work")
    path.symlink_to(target)
    with pytest.raises(DpvipInputError, match="must not be a symlink"):
        RunRandomness.secret(tmp_path / "work")


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
def test_a_key_of_another_user_is_refused(tmp_path):
    _planted(tmp_path, 0o600)
    os.chown(key_path(tmp_path / "work"), 65534, 65534)
    with pytest.raises(DpvipInputError, match="of this user"):
        RunRandomness.secret(tmp_path / "work")


def test_a_key_is_deleted_when_its_run_is_done_unless_kept(tmp_path, monkeypatch):
    RunRandomness.secret(tmp_path / "work")
    monkeypatch.setenv("DPVIP_KEEP_KEYS", "true")
    release_key(tmp_path / "work")
    assert key_path(tmp_path / "work").exists()
    monkeypatch.delenv("DPVIP_KEEP_KEYS")
    release_key(tmp_path / "work")
    assert not key_path(tmp_path / "work").exists()
    assert RunRandomness.secret(tmp_path / "work").created  # a rerun makes a new key


def test_a_damaged_key_is_refused(tmp_path):
    _planted(tmp_path, 0o600)
    key_path(tmp_path / "work").write_bytes(b"short")
    with pytest.raises(DpvipInputError, match="holds 5 bytes"):
        RunRandomness.secret(tmp_path / "work")


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
    seeded = RunRandomness.for_run("seeded", tmp_path, 5, {"a": 1})
    assert seeded.seed("noise", 0) == RunRandomness.seeded(5).child({"a": 1}).seed("noise", 0)
    assert not key_path(tmp_path).exists()


def test_the_key_never_shows_in_its_text(tmp_path):
    key = RunRandomness.secret(tmp_path)
    secret = key_path(tmp_path).read_bytes()
    shown = repr(key) + str(key) + repr(key.record())
    assert secret.hex() not in shown and "secret" in shown


def test_the_default_key_store_lies_outside_the_published_results():
    """Publishing results/ must never publish a key: the library's default store and the
    workflow's default privacy.key_dir are the same folder, outside results/ (a mutation that
    moved it to results/keys passed every other test, since keys are deleted when runs end)."""
    from pathlib import Path

    import yaml

    from dpvip.privacy.randomness import DEFAULT_KEY_DIR

    schema = yaml.safe_load((Path(__file__).resolve().parents[2] / "config" / "schema.yaml").read_text())
    workflow_default = schema["properties"]["privacy"]["properties"]["key_dir"]["default"]
    assert workflow_default == DEFAULT_KEY_DIR
    workflow = (Path(__file__).resolve().parents[2] / "rules" / "common.smk").read_text()
    results = workflow.split('RESULTS = "', 1)[1].split('"', 1)[0]
    assert results == "results" and not Path(DEFAULT_KEY_DIR).is_absolute()
    assert Path(DEFAULT_KEY_DIR).parts[0] != results and ".." not in Path(DEFAULT_KEY_DIR).parts


def test_a_symlinked_folder_inside_the_store_is_refused_not_followed(tmp_path):
    """A sub-folder of the store that links elsewhere (a 0755 folder outside it) would put the
    key where others read it: refused when the key would be made, and when read."""
    RunRandomness.secret(tmp_path / "first")  # the store exists, mode 0700
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o755)
    link = key_path(tmp_path / "sub" / "work").parent
    link.symlink_to(outside)
    with pytest.raises(DpvipInputError, match=r"in the key store must be a folder of this user, not a symlink"):
        RunRandomness.secret(tmp_path / "sub" / "work")
    assert not any(outside.iterdir())  # no key written through the link


def test_a_store_whose_mode_was_opened_is_refused_when_a_key_is_read(tmp_path):
    RunRandomness.secret(tmp_path / "work")
    store = key_store()
    store.chmod(0o755)
    try:
        with pytest.raises(DpvipInputError, match=r"key store .* has mode 755, not 700: others may read its keys"):
            RunRandomness.secret(tmp_path / "work")  # the key exists: only read
    finally:
        store.chmod(0o700)
