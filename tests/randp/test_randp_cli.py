"""`dpvip dprandp`: the plan of a configuration, and one-line errors."""

from __future__ import annotations

from conftest import run_dpvip


def test_plan_lists_phase1_and_private_runs():
    done = run_dpvip("dprandp", "plan")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "phase1 randp_wrn10_1: wrn10_1 on stylegan_oriented (align_uniform)"
    assert "private/CIFAR-10/randp_wrn10_1/p4_eps1_seed0" in lines and "private/CIFAR-10/cold/p0_eps8_seed1" in lines


def test_bad_requests_are_one_line_errors(tmp_path):
    done = run_dpvip(
        "dprandp", "private", "--run", "private/CIFAR-10/cold/p0_eps3_seed0", "--out", str(tmp_path / "r.json")
    )
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0
    assert "no DP-RandP run 'private/CIFAR-10/cold/p0_eps3_seed0'" in done.stderr
    done = run_dpvip(
        "dprandp", "private", "--run", "private/CIFAR-10/randp_wrn10_1/p4_eps1_seed0", "--out", str(tmp_path / "r.json")
    )
    assert done.returncode == 2 and "give its model.pt with --init" in done.stderr
    done = run_dpvip("dprandp", "plan", "--config", str(tmp_path / "missing.yaml"))
    assert done.returncode == 2 and "missing.yaml does not exist" in done.stderr


def test_config_is_layered_over_the_embedded_default_as_configfile_does(tmp_path):
    """A file without `synthetic:` (a KeyError traceback before) plans over config/config.yaml."""
    partial = tmp_path / "site.yaml"
    partial.write_text("dprandp:\n  private:\n    seeds: [7]\n")
    done = run_dpvip("dprandp", "plan", "--config", str(partial))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "phase1 randp_wrn10_1: wrn10_1 on stylegan_oriented (align_uniform)"
    assert "private/CIFAR-10/cold/p0_eps8_seed7" in lines and "private/CIFAR-10/cold/p0_eps8_seed1" not in lines
    listing = tmp_path / "list.yaml"
    listing.write_text("- 1\n- 2\n")
    done = run_dpvip("dprandp", "plan", "--config", str(listing))
    assert (done.returncode, done.stderr.strip()) == (
        2,
        f"dpvip: error: config file {listing} holds a list, not a mapping of config keys",
    )


def test_a_bad_config_file_is_one_line_naming_the_file_and_what_is_wrong(tmp_path):
    files = {
        "syntax.yaml": (
            "dprandp:\n  private: [1\n",
            " is not YAML: while parsing a flow sequence, expected ',' or ']', "
            "but got '<stream end>' (line 3, column 1)",
        ),
        "schema.yaml": (
            "dprandp:\n  private:\n    seeds: -1\n",
            ": config key 'dprandp.private.seeds': -1 is not of type 'array'",
        ),
        # the workflow's plan-time check, before any job: batch <= n of the photo crops stand-in
        "batch.yaml": (
            "dprandp:\n  private:\n    tasks: {CIFAR-10: {batch_size: 5000}}\n",
            ": dprandp.private.tasks.CIFAR-10.batch_size 5000 exceeds n = 3960 training examples "
            "(the photo_crops train split of dprandp.private.tasks.CIFAR-10.data less its validation_fraction)",
        ),
        "delta.yaml": (
            "dprandp:\n  private:\n    tasks: {CIFAR-10: {delta: 0.01}}\n",
            ": dprandp.private.tasks.CIFAR-10.delta 0.01 is not below 1/n for n = 3960 training examples "
            "(the photo_crops train split of dprandp.private.tasks.CIFAR-10.data less its validation_fraction); "
            "lower it, or set privacy.allow_large_delta: true",
        ),
    }
    for name, (text, reason) in files.items():
        path = tmp_path / name
        path.write_text(text)
        done = run_dpvip("dprandp", "plan", "--config", str(path))
        assert (done.returncode, done.stderr.strip()) == (2, f"dpvip: error: config file {path}{reason}"), done.stderr
        assert done.stdout == ""
    not_utf8 = tmp_path / "latin1.yaml"
    not_utf8.write_bytes(b"\xff\xfe")
    done = run_dpvip("dprandp", "phase1", "--config", str(not_utf8), "--name", "x", "--data", "x", "--out", "x")
    assert (done.returncode, done.stderr.strip()) == (
        2,
        f"dpvip: error: config file {not_utf8} is not UTF-8 text (byte 0: invalid start byte)",
    )
