"""The empirical audit's table and figure."""

from dpvip.report.privacy_empirical import BOUNDS, empirical_figure, empirical_table


def record(mechanism: str, claimed: float, one_run: float, tight: float, black_box: float = 0.1) -> dict:
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
        "one_run_black_box": black_box,
        "tight_white_box": tight,
        "gdp_white_box": tight + 0.2,
        "canaries": 20000,
        "black_box_canaries": 700,
        "runs": 4,
        "trials": 80000,
        "confidence": 0.95,
    }


def test_the_table_sets_each_bound_beside_its_claim():
    rows = [record("mehta_head", 2.0, 1.2, 0.7), record("dp_mae", 8.0, 0.0, 1.5, black_box=2.0)]
    frame, title, notes = empirical_table(rows)
    assert list(frame["mechanism"]) == ["mehta_head", "dp_mae"]
    # the largest of the four bounds over the claim: one-run 1.2 / 2; black-box 2.0 / 8
    assert list(frame["audit / claimed"]) == [0.6, 2.0 / 8.0]
    assert list(frame["epsilon one-run black-box"]) == [0.1, 2.0] and len(BOUNDS) == 4
    assert any("black-box: input canaries" in note for note in notes) and "Empirical privacy audit" in title


def test_the_figure_draws_the_claim_and_every_bound():
    figure = empirical_figure([record("mehta_head", e, e / 2, e / 3) for e in (0.5, 1.0, 2.0)])
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert labels == [
        "claimed (the accountant)",
        "one-run white-box",
        "tight white-box",
        "tight white-box, Gaussian trade-off",
        "one-run black-box",
    ]
