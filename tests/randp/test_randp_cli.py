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
