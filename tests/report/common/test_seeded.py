"""A table built from seeded runs says they are not private; from secret runs it says nothing."""

from dpvip.report.common.seeded import randomness_notes, seeded_runs


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


def test_a_table_of_seeded_runs_says_not_private_in_the_body_of_every_form(tmp_path):
    """Not only in the notes: a CSV has none, and LaTeX notes are comments no reader sees."""
    import pandas as pd

    from dpvip.report.common.tables import write_table

    (note,) = randomness_notes([{"privacy": ledger("seeded")}])
    write_table(pd.DataFrame({"accuracy": [91.5]}), tmp_path / "t.csv", "Accuracy", [note])
    assert list(pd.read_csv(tmp_path / "t.csv")["privacy"]) == ["NOT PRIVATE"]
    markdown = (tmp_path / "t.md").read_text()
    assert markdown.startswith("# NOT PRIVATE: Accuracy") and f"**{note}**" in markdown
    body = [line for line in (tmp_path / "t.tex").read_text().splitlines() if not line.startswith("%")]
    assert any("NOT PRIVATE" in line for line in body)
    write_table(pd.DataFrame({"accuracy": [91.5]}), tmp_path / "s.csv", "Accuracy", [])  # secret runs: nothing
    assert "privacy" not in pd.read_csv(tmp_path / "s.csv") and "NOT PRIVATE" not in (tmp_path / "s.tex").read_text()


def test_a_figure_of_seeded_runs_says_not_private_in_its_title(tmp_path):
    import matplotlib.pyplot as plt

    from dpvip.report.common.figures import save_figure

    shown = {}
    for name, randomness in (("seeded", "seeded"), ("secret", "secret")):
        figure, axes = plt.subplots()
        figure.suptitle("Loss")
        axes.plot([0, 1])
        save_figure(figure, tmp_path / f"{name}.png", [{"privacy": ledger(randomness)}])
        shown[name] = figure._suptitle.get_text()
    assert shown["seeded"].startswith("NOT PRIVATE") and shown["seeded"].endswith("Loss")
    assert shown["secret"] == "Loss"
