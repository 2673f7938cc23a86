"""DP-RandP Tables 8 and 9 (computational cost) on constructed measurements: the paper's times
in seconds beside ours, Phase I from its metrics windows, Phases II and III from the seconds
per step of the runs that spend every step in one phase, untimed runs left out."""

from __future__ import annotations

import math

import pytest

from dpvip.plan.dprandp_runs import DPRandPPlan
from dpvip.report.dprandp.costs import CostInputs, cost_table, phase1_seconds
from dpvip.report.common.tables import write_table

from dprandp.test_tables import CONFIG, PLAN, VALUES, fake_results

FEATURES = "wrn/digits/projection1_center12"


def metrics(seconds_per_window: float = 1.0, batch: int = 256) -> list[dict]:
    """Phase I records every 2 steps, each window taking `seconds_per_window`."""
    return [
        {"step": step, "loss": -1.0, "images_per_second": 2 * batch / seconds_per_window, "epoch": step / 8}
        for step in range(2, 26, 2)
    ]


def timed_results(seconds_zero: int = 0) -> dict:
    """Phase II costs 0.05 s a step, Phase III 0.2 s; the first `seconds_zero` runs timed nothing."""
    results = fake_results("table9")
    for k, result in enumerate(results.values()):
        p2 = result["run"]["phase2_steps"]
        result["seconds"] = 0.0 if k < seconds_zero else 0.05 * p2 + 0.2 * (result["steps"] - p2)
    return results


def probe(seconds=(0.5, 1.5)) -> dict:
    runs = [
        {"features": FEATURES, "result": {"seconds": s, "steps": 100, "accuracy": 50.0}, "settings": {"lr": 1.0}}
        for s in seconds
    ]
    return {"runs": runs, "features": {FEATURES: {"train": 1437, "test": 360, "classes": 10}}}


def inputs(**changes) -> CostInputs:
    base = CostInputs(
        phase1={run.name: metrics() for run in PLAN.phase1_runs()},
        feature_seconds={FEATURES: 3.0},
        results=timed_results(),
        probe=probe(),
    )
    for key, value in changes.items():
        setattr(base, key, value)
    return base


def test_phase1_seconds_add_up_its_metric_windows():
    records = [{"step": 2, "images_per_second": 512.0}, {"step": 6, "images_per_second": 256.0}]
    assert phase1_seconds(records, 256) == pytest.approx(2 * 256 / 512 + 4 * 256 / 256)


def test_table8_puts_phase1_and_feature_extraction_beside_the_papers(tmp_path):
    frame, title, notes = cost_table("table8", PLAN, inputs(), VALUES, "embedded", cores=2)
    rows = frame.set_index("procedure")
    assert list(rows.index[:2]) == ["Phase I", "feature extraction in LP"]  # the paper's, in its order
    assert rows.at["Phase I", "paper"] == "16 h" and rows.at["Phase I", "paper (s)"] == 16 * 3600
    assert rows.at["Phase I", "ours (s)"] == pytest.approx(12.0)  # 12 windows of 1 s
    assert rows.at["Phase I", "ours per step (s)"] == pytest.approx(0.5)
    assert "24 steps of 256 view pairs (3 epochs)" in rows.at["Phase I", "our work"]
    assert (
        rows.at["feature extraction in LP", "paper (s)"] == 60 and rows.at["feature extraction in LP", "ours (s)"] == 3
    )
    assert "1437 train + 360 test" in rows.at["feature extraction in LP", "our work"]
    assert "Phase I: randp_wrn16_1" in rows.index  # our ablation Phase I runs follow
    assert any("CPU, 1 thread per job (dprandp.threads) on a 2-core machine" in n for n in notes)
    write_table(frame, tmp_path / "dprandp_table8.csv", title, notes)
    assert (tmp_path / "dprandp_table8.md").read_text().startswith("# DP-RandP Table 8")


def test_table9_times_each_phase_from_runs_that_spend_every_step_in_it():
    frame, _, notes = cost_table("dprandp_table9", PLAN, inputs(), VALUES)
    rows = frame.set_index("procedure")
    assert list(rows.index) == ["linear probing in LP", "Phase II", "Phase III", "DP-RandP run (Phases II and III)"]
    assert rows.at["linear probing in LP", "ours (s)"] == pytest.approx(1.0)  # mean of 0.5 and 1.5
    assert rows.at["linear probing in LP", "ours per step (s)"] == pytest.approx(0.01)
    assert rows.at["Phase II", "ours (s)"] == pytest.approx(4 * 0.05)  # 4 Phase II steps at epsilon 1
    assert rows.at["Phase III", "ours (s)"] == pytest.approx(20 * 0.2)
    assert rows.at["DP-RandP run (Phases II and III)", "ours (s)"] == pytest.approx(4 * 0.05 + 20 * 0.2)
    assert rows.at["Phase II", "paper (s)"] == 720 and rows.at["Phase II", "paper per step (s)"] == pytest.approx(7.5)
    assert rows.at["Phase III", "paper per step (s)"] == pytest.approx(5.5 * 3600 / (875 - 96))
    assert "batch 128, augmult 2" in rows.at["Phase III", "our work"]
    assert not any(note.startswith("Not measured") for note in notes)


def test_untimed_runs_are_left_out_and_missing_measurements_named():
    frame, _, notes = cost_table("table9", PLAN, inputs(results=timed_results(seconds_zero=1), probe=None), VALUES)
    rows = frame.set_index("procedure")
    assert rows.at["Phase III", "ours (s)"] == pytest.approx(20 * 0.2)  # the other runs still time it
    assert (
        math.isnan(rows.at["linear probing in LP", "ours (s)"]) and rows.at["linear probing in LP", "paper"] == "1 min"
    )
    assert any(note.startswith("Not measured here: linear probing in LP") for note in notes)
    assert any(note.startswith("1 run(s) with 0 seconds") for note in notes)


def test_gpu_runs_say_so():
    plan = DPRandPPlan({**CONFIG["dprandp"], "gpus": 1}, CONFIG["synthetic"]["datasets"])
    _, _, notes = cost_table("table8", plan, inputs(), VALUES, "paper")
    assert notes[0].startswith("Scale: paper.") and "Ours: 1 GPU(s) per job" in notes[0]
