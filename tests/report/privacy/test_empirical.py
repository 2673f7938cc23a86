"""The empirical audit's table and figure: each column's power beside it, the columns that
cannot refute the claim named, the Gaussian trade-off labelled an estimate, and "audit /
claimed" read from the headline at the joint confidence (each valid column at Bonferroni's)."""

import pytest

from dpvip.audit.bounds import audit_summary
from dpvip.report.privacy.empirical import BOUNDS, empirical_figure, empirical_table

ESTIMATE = "epsilon white-box estimate (Gaussian trade-off, not a bound)"


def record(mechanism: str, claimed: float, one_run: float, tight: float, black_box: float = 0.1) -> dict:
    """A record whose headline (each valid column at 1 - 0.05 / 3) is 0.9 of its largest column."""
    return {
        "mechanism": mechanism,
        "claimed_epsilon": claimed,
        "tightest_epsilon": 0.8 * claimed,
        "tightest_accountant": "pld",
        "delta": 1e-6,
        "accountant": "prv",
        "sample_rate": 1.0,
        "noise_multiplier": 2.2,
        "steps": 1,
        "clip_norm": 1.0,
        "one_run_white_box": one_run,
        "one_run_black_box": black_box,
        "tight_white_box": tight,
        "gdp_white_box": tight + 5.0,
        "one_run_white_box_power": 3.2,
        "one_run_black_box_power": 2.5,
        "tight_white_box_power": 9.0,
        "gdp_white_box_power": 20.0,
        "canaries": 20000,
        "canary_norm": 10.0,
        "black_box_canaries": 700,
        "runs": 4,
        "trials": 80000,
        "confidence": 0.95,
        "headline_epsilon": 0.9 * max(one_run, tight, black_box),
        "headline_confidence": 0.95,
        "headline_column_confidence": 1 - 0.05 / 3,
        "split_seed": 7,
    }


def test_the_table_sets_each_bound_and_its_power_beside_its_claim():
    rows = [record("mehta_head", 2.0, 1.2, 0.7), record("dp_mae", 8.0, 0.0, 1.5, black_box=2.0)]
    frame, title, notes = empirical_table(rows)
    assert list(frame["mechanism"]) == ["mehta_head", "dp_mae"]
    # the headline over the claim: the largest valid bound at the joint confidence (the estimate,
    # 5.7 and 6.5, is left out): 0.9 x 1.2 / 2; 0.9 x 2.0 / 8
    assert list(frame["audit / claimed"]) == pytest.approx([0.9 * 0.6, 0.9 * 2.0 / 8.0])
    assert list(frame["audit / tightest"]) == pytest.approx([0.9 * 0.6 / 0.8, 0.9 * 2.0 / 8.0 / 0.8])
    assert list(frame["epsilon one-run black-box"]) == [0.1, 2.0] and len(BOUNDS) == 3
    assert list(frame[ESTIMATE]) == [5.7, 6.5]
    columns = list(frame.columns)
    assert columns.index("power one-run white-box") == columns.index("epsilon one-run white-box") + 1
    assert list(frame["power tight white-box"]) == [9.0, 9.0]
    # claim 2: every column can refute it but the black-box (2.5 >= 2 too): none; claim 8: both one-run
    assert list(frame["cannot refute the claim"]) == ["none", "one-run white-box; one-run black-box"]
    assert any("black-box: input canaries" in note for note in notes) and "Empirical privacy audit" in title
    assert any("not a bound" in note for note in notes)
    assert any("Bonferroni" in note and "split_seed" in note for note in notes)


def test_the_summary_line_gives_each_power_and_marks_what_cannot_refute():
    line = audit_summary(record("dp_mae", 8.0, 0.5, 1.5))
    assert "one-run white-box 0.5 (power 3.2, cannot refute the claim)" in line
    assert "tight white-box 1.5 (power 9)" in line
    assert "white-box estimate (Gaussian trade-off, not a bound) 6.5 (power 20)" in line


def test_the_figure_draws_the_claim_and_every_bound_with_its_power():
    figure = empirical_figure([record("mehta_head", e, e / 2, e / 3) for e in (0.5, 1.0, 2.0)])
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    columns = [
        "one-run white-box",
        "one-run black-box",
        "tight white-box",
        "white-box estimate (Gaussian trade-off, not a bound)",
    ]
    powers = [f"{c}, power" for c in columns[:3]] + [f"{columns[3]}, power (20: off the plot)"]
    assert labels == ["claimed (the accountant)", *[x for pair in zip(columns, powers) for x in pair]]
    assert figure.axes[0].get_ylim()[1] == 1.15 * 9.0  # the largest valid power sets the scale
