"""Mehta et al.'s claims on constructed studies: each compares the cells it names (DP-LAMB
against DP-SGD at the largest batch, the largest batch against the smallest, zero against
LeCun init, the largest epsilon against the smallest) at each cell's chosen learning rate."""

from __future__ import annotations

from dpvip.report.mehta_claims import mehta_claims, mehta_claims_table

ROWS = ("ResNet50x4 / Last layer", "ViT-B/16 / Last layer")
TEST = 100_000


def study(cells: dict[tuple[str, str], float], seeds=(0, 1, 2)) -> dict:
    """A study result: two learning rates per cell (the worse 5 points lower), 3 seeds."""
    runs = [
        {
            "row": row,
            "column": column,
            "settings": {"lr": lr, "seed": seed},
            "result": {"accuracy": value - (5.0 if lr == 0.01 else 0.0) + 0.1 * seed},
        }
        for (row, column), value in cells.items()
        for lr in (0.1, 0.01)
        for seed in seeds
    ]
    return {"runs": runs, "features": {"x": {"test": TEST}}}


def studies(lamb: float, sgd: float, large: float, small: float, zero: float, lecun: float, high: float, low: float):
    private = "With privacy / batch=2^{}"
    return {
        "mehta_table1": study({(row, private.format(20)): sgd for row in ROWS}),
        "mehta_table2": study(
            {(row, private.format(20)): lamb for row in ROWS}
            | {(ROWS[1], private.format(17)): small}
            | {(ROWS[1], private.format(20)): large}
        ),
        "mehta_table4": study({("No change", "Accuracy"): zero, ("Zero Init -> Lecun Normal Init", "Accuracy"): lecun}),
        "mehta_table5": study({("ImageNet-1k", "epsilon=0.5"): low, ("ImageNet-1k", "epsilon=8.0"): high}),
    }


def verdicts(found):
    return {claim.key: claim.verdict.verdict for claim in found}


def test_the_claims_hold_on_the_papers_pattern():
    claims = mehta_claims(studies(lamb=68.8, sgd=47.1, large=68.8, small=60.0, zero=81, lecun=10, high=72, low=19))
    assert verdicts(claims) == dict.fromkeys("abcd", "held") | dict.fromkeys("ef", "not tested")
    assert claims[2].measured == "zero init vs LeCun normal init: 81.10 (3 seeds) vs 10.10 (3 seeds)"
    assert claims[3].verdict.runs == "3 / 3"
    assert claims[2].verdict.verdict == "held"  # LeCun init at chance: the claim expects that arm there
    assert claims[0].verdict.interval.startswith("ResNet50x4: +21.70 [")  # one interval per model


def test_the_claims_fail_when_the_numbers_flip():
    claims = mehta_claims(studies(lamb=40, sgd=60, large=50, small=60, zero=10, lecun=50, high=20, low=40))
    assert verdicts(claims) == dict.fromkeys("abcd", "not held") | dict.fromkeys("ef", "not tested")


def test_models_that_disagree_make_the_claim_mixed():
    found = studies(lamb=60, sgd=50, large=60, small=50, zero=80, lecun=10, high=70, low=20)
    found["mehta_table1"] = study(
        {(ROWS[0], "With privacy / batch=2^20"): 70.0, (ROWS[1], "With privacy / batch=2^20"): 50.0}
    )
    claim = mehta_claims(found)[0]
    assert claim.verdict.verdict == "mixed" and "ResNet50x4 points against" in claim.verdict.reason


def test_both_models_against_the_claim_make_it_not_held():
    found = studies(lamb=60, sgd=50, large=60, small=50, zero=80, lecun=10, high=70, low=20)
    found["mehta_table1"] = study({(row, "With privacy / batch=2^20"): 70.0 for row in ROWS})
    assert verdicts(mehta_claims(found))["a"] == "not held"


def test_without_the_studies_nothing_is_tested():
    frame, _, notes = mehta_claims_table({}, "embedded")
    assert (frame["verdict"] == "not tested").all() and len(frame) == 6
    assert any("learning rate its table chose" in note for note in notes)
