"""The empirical audit's table and figure."""

import math

from dpvip.report.privacy_empirical import BLACK_BOX, empirical_figure, empirical_table


def record(mechanism: str, claimed: float, one_run: float, tight: float) -> dict:
    return {
        "mechanism": mechanism,
        "claimed_epsilon": claimed,
        "delta": 1e-6,
        "accountant": "prv",
        "sample_rate": 1.0,
        "noise_multiplier": 2.2,
        "steps": 1,
        "clip_norm": 1.0,
        "one_run_white_box": one_run,
        "tight_white_box": tight,
        "canaries": 20000,
        "runs": 4,
        "trials": 80000,
        "confidence": 0.95,
    }


def test_the_table_sets_each_bound_beside_its_claim():
    frame, title, notes = empirical_table([record("mehta_head", 2.0, 1.2, 0.7), record("dp_mae", 8.0, 0.0, 1.5)])
    assert list(frame["mechanism"]) == ["mehta_head", "dp_mae"]
    assert list(frame["audit / claimed"]) == [0.6, 1.5 / 8.0]
    assert all(math.isnan(v) for v in frame[BLACK_BOX]) and any("not run yet" in note for note in notes)
    assert "Empirical privacy audit" in title


def test_the_figure_draws_the_claim_and_both_bounds():
    figure = empirical_figure([record("mehta_head", e, e / 2, e / 3) for e in (0.5, 1.0, 2.0)])
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert labels == ["claimed (the accountant)", "one-run white-box", "tight white-box"]
