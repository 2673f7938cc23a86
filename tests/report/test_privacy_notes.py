"""A table built from seeded runs says they are not private; from secret runs it says nothing."""

from dpvip.report.privacy_notes import randomness_notes, seeded_runs


def ledger(randomness: str) -> dict:
    return {"randomness": randomness, "private": randomness == "secret", "epsilon_spent": 1.0}


def test_seeded_ledgers_anywhere_in_the_results_give_the_note():
    results = [
        {"privacy": ledger("secret")},
        {"runs": [{"result": {"privacy": ledger("seeded")}}, {"result": {"privacy": ledger("seeded")}}]},
    ]
    assert seeded_runs(results) == 2
    (note,) = randomness_notes(results)
    assert note.startswith("NOT PRIVATE") and "2 DP run(s)" in note


def test_secret_or_non_private_runs_give_no_note():
    assert randomness_notes([{"privacy": ledger("secret")}, {"privacy": None}, {"randomness": "seeded"}]) == []
