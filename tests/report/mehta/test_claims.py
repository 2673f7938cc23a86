"""Mehta et al.'s claims on constructed studies: each compares the cells it names (DP-LAMB
against DP-SGD at the largest batch, the largest batch against the smallest, zero against
LeCun init, the largest epsilon against the smallest) at each cell's chosen learning rate."""

from __future__ import annotations

from dpvip.report.mehta.claims import CATALOGUE, mehta_claims, mehta_claims_table

ROWS = ("ResNet50x4 / Last layer", "ViT-B/16 / Last layer")
TEST = 100_000


def study(cells: dict[tuple[str, str], float], seeds=(0, 1, 2), classes=None) -> dict:
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
    return {"runs": runs, "features": {"x": {"test": TEST} | ({"classes": classes} if classes else {})}}


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


JUDGED = [*"abcdghjkqrsuvwyz", "aa", "aj"]
EQUAL = ["i", "p", "t", "ab", "ac", "ad"]  # claims of no difference: equivalence within the margin
TABLE4 = {  # the paper's deltas on 'No change' (Tab. 4), in our units
    "DP-LAMB -> DP-SGD with Momentum": -10,
    "10 epochs -> 1 epochs": 5,
    "Clip at 1 -> 10": -5,
    "Resolution 384 -> 512": -8,
    "Resolution 384 -> 256": 6,
    "Inception Crop -> Center Crop": 4,
}


def all_studies(sign: float = 1.0) -> dict:
    """Every study the claims read on the paper's pattern (`sign` 1) or flipped (-1): each
    difference the paper reports, 10 points or more, its sign set by `sign`."""
    d = sign * 10
    private, public = "With privacy / batch=2^{}", "Without privacy / batch=2^{}"
    found = studies(lamb=50 + d, sgd=50, large=50 + d, small=50, zero=50 + 3 * d, lecun=50, high=50 + d, low=50)
    found["mehta_table1"] = study(
        {(row, private.format(20)): 50 for row in ROWS}
        | {(row, private.format(17)): 50 - d for row in ROWS}
        | {(row, public.format(17)): 60 + d for row in ROWS}
        | {(row, public.format(20)): 50 - d if row.startswith("ResNet") else 60 for row in ROWS}
    )
    table2 = {(row, private.format(20)): 50 + d for row in ROWS} | {(row, private.format(17)): 50 for row in ROWS}
    found["mehta_table2"] = study(table2 | {(row, public.format(20)): 60 + d for row in ROWS})
    found["mehta_table4"] = study(
        {("No change", "Accuracy"): 50, ("Zero Init -> Lecun Normal Init", "Accuracy"): 50 - 3 * d}
        | {(row, "Accuracy"): 50 + sign * delta for row, delta in TABLE4.items()}
    )
    figure2 = {("(a) lamb", f"lr={lr}"): 40 + d - k for k, lr in enumerate((0.1, 1))}
    figure2 |= {("(a) sgd", f"lr={lr}"): 40 - k for k, lr in enumerate((0.1, 1))}
    figure2 |= {("(b) resolution", size): 50 + (d if size == "24" else 0) for size in ("16", "24", "32")}
    figure2 |= {("(c) init scale", scale): 50 + (d if scale == "0" else 0) for scale in ("0", "0.1", "1")}
    found["mehta_figure2"] = study(figure2)
    return found


def test_the_claims_hold_on_the_papers_pattern():
    claims = mehta_claims(studies(lamb=68.8, sgd=47.1, large=68.8, small=60.0, zero=81, lecun=10, high=72, low=19))
    assert {k: verdicts(claims)[k] for k in "abcd"} == dict.fromkeys("abcd", "held")
    assert claims[2].measured == "zero init vs LeCun normal init: 81.10 (3 seeds) vs 10.10 (3 seeds)"
    assert claims[3].verdict.runs == "3 / 3"
    assert claims[2].verdict.verdict == "held"  # LeCun init at chance: the claim expects that arm there
    assert claims[0].verdict.interval.startswith("ResNet50x4: +21.70 [")  # one interval per model


def test_an_arm_the_claim_says_falls_to_chance_is_judged_there():
    """Claim (c): LeCun init drops to chance (10 classes). The two-sided guard would call any
    other arm at chance uninformative; this one is what the claim is about."""
    table4 = {("No change", "Accuracy"): 81.0, ("Zero Init -> Lecun Normal Init", "Accuracy"): 10.0}
    claims = {c.key: c for c in mehta_claims({"mehta_table4": study(table4, classes=10)})}
    assert claims["c"].verdict.verdict == "held"
    worse_at_chance = {("No change", "Accuracy"): 81.0, ("Clip at 1 -> 10", "Accuracy"): 10.0}
    claims = {c.key: c for c in mehta_claims({"mehta_table4": study(worse_at_chance, classes=10)})}
    assert claims["s"].verdict.verdict == "uninformative", claims["s"].verdict


def test_the_claims_fail_when_the_numbers_flip():
    claims = mehta_claims(studies(lamb=40, sgd=60, large=50, small=60, zero=10, lecun=50, high=20, low=40))
    assert {k: verdicts(claims)[k] for k in "abcd"} == dict.fromkeys("abcd", "not held")


def test_every_judged_claim_holds_on_the_pattern_and_fails_flipped():
    """Tables 1, 2 and 4 and Figure 2: each claim's cells, 3 seeds, 10 points or more apart."""
    held, flipped = verdicts(mehta_claims(all_studies())), verdicts(mehta_claims(all_studies(-1.0)))
    assert {k: held[k] for k in JUDGED} == dict.fromkeys(JUDGED, "held")
    assert {k: flipped[k] for k in JUDGED} == dict.fromkeys(JUDGED, "not held")
    assert {v for k, v in held.items() if k not in JUDGED + EQUAL} == {"not tested"}


def test_the_new_claims_compare_the_right_cells():
    claims = {claim.key: claim for claim in mehta_claims(all_studies())}
    assert claims["g"].measured.startswith(
        "ResNet50x4 / Last layer, DP-SGD: With privacy / batch=2^20 50.10 (3 seeds) vs With privacy / batch=2^17"
    )
    assert "Without privacy / batch=2^17" in claims["h"].measured and claims["h"].verdict.runs.count("3 / 3") == 2
    assert claims["k"].measured.startswith("ResNet50x4 / Last layer, DP-LAMB: batch 2^20 vs 2^17")
    assert claims["q"].measured.startswith("No change vs DP-LAMB -> DP-SGD with Momentum:")
    assert claims["v"].measured.startswith("Resolution 384 -> 256 vs No change:")
    assert claims["y"].measured.endswith("50.10 (3 seeds) vs 40.10 (3 seeds)")  # each optimizer's best rate
    assert claims["z"].measured.startswith("one DP step by resolution: 16px")
    assert claims["aa"].measured.startswith("one DP step: init scale 0 vs 1:")
    assert claims["i"].verdict.verdict == "not tested"  # no Best cell in these studies


def test_models_that_disagree_make_the_claim_mixed():
    found = studies(lamb=60, sgd=50, large=60, small=50, zero=80, lecun=10, high=70, low=20)
    found["mehta_table1"] = study(
        {(ROWS[0], "With privacy / batch=2^20"): 70.0, (ROWS[1], "With privacy / batch=2^20"): 50.0}
    )
    claim = mehta_claims(found)[0]
    assert claim.verdict.verdict == "mixed" and "not held for ResNet50x4" in claim.verdict.reason


def test_both_models_against_the_claim_make_it_not_held():
    found = studies(lamb=60, sgd=50, large=60, small=50, zero=80, lecun=10, high=70, low=20)
    found["mehta_table1"] = study({(row, "With privacy / batch=2^20"): 70.0 for row in ROWS})
    assert verdicts(mehta_claims(found))["a"] == "not held"


def test_without_the_studies_nothing_is_tested():
    frame, _, notes = mehta_claims_table({}, "embedded")
    assert (frame["verdict"] == "not tested").all() and len(frame) == len(CATALOGUE.keys()) == 38
    assert any("learning rate its table chose" in note for note in notes)


def equal_studies(gap: float) -> dict:
    """The cells of the claims of no difference, each pair `gap` points apart."""
    best, small = "Without privacy / Best", "Without privacy / batch=2^17"
    return {
        "mehta_table2": study({(row, best): 70.0 for row in ROWS} | {(row, small): 70.0 + gap for row in ROWS}),
        "mehta_table4": study(
            {("No change", "Accuracy"): 60.0, ("DP-LAMB -> DP-Adam", "Accuracy"): 60.0 + gap}
            | {("Clip at 1 -> 0.1", "Accuracy"): 60.0 - gap}
        ),
        "mehta_figure1b": study(
            {("delta=1e-06", "epsilon=4"): 70.0, ("delta=1e-06", "epsilon=10"): 70.0 + gap}
            | {("delta=8e-07", "epsilon=10"): 70.0}
        ),
        "mehta_figure2": study({("(c) init scale", "0"): 50.0, ("(c) init scale", "0.001"): 50.0 - gap}),
    }


def test_claims_of_no_difference_are_judged_as_equivalence():
    """TOST within the catalogue's margin (3 points): equal cells are equivalent, cells 10
    points apart refute the claim; the margin is stated in the reason."""
    same = {claim.key: claim for claim in mehta_claims(equal_studies(0.0))}
    assert {key: same[key].verdict.verdict for key in EQUAL} == dict.fromkeys(EQUAL, "equivalent")
    assert same["p"].verdict.reason.startswith("margin +-3") and CATALOGUE.margins["p"] == 3.0
    assert same["ad"].measured.startswith("delta=1e-06 / epsilon=10 ")
    apart = {claim.key: claim for claim in mehta_claims(equal_studies(10.0))}
    assert {key: apart[key].verdict.verdict for key in EQUAL} == dict.fromkeys(EQUAL, "not held")
