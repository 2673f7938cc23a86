"""The total epsilon of what is published together (`dpvip.report.privacy.totals`): releases
grouped by the private dataset their ledgers name, each run counted once however often it is
published, composed with PLD, and found in the statement, PRIVACY.md and a table's notes."""

import pytest

from dpvip.privacy import accounting
from dpvip.report.privacy.notes import privacy_notes
from dpvip.report.privacy.statement import build_statement, render
from dpvip.report.privacy.totals import UNNAMED, releases, totals
from dpvip.transfer.private_probe import composed_epsilon


def ledger(run: str | None, data: str | None = "photo_crops", q=0.05, sigma=1.1, steps=40, **changes) -> dict:
    record = {"accountant": "rdp", "sample_rate": q, "noise_multiplier": sigma, "clip_norm": 1.0, "delta": 1e-5}
    record |= {"steps_done": steps, "epsilon_spent": 1.0, "examples": 4400, "randomness": "secret", "private": True}
    return record | {"data": data, "run": run} | changes


def pld(mechanisms, delta=1e-5) -> float:
    return accounting.epsilon(mechanisms, delta, "pld").epsilon


def test_releases_on_one_dataset_compose_and_other_data_stays_apart():
    records = [
        {"privacy": ledger("a")},
        {"privacy": ledger("b", q=0.1, sigma=2.0, steps=25)},
        {"privacy": ledger("c", data="image_folder /data/cifar10/train")},
    ]
    by_data = {t["data"]: t for t in totals(records)}
    assert set(by_data) == {"photo_crops", "image_folder /data/cifar10/train"}
    photos = by_data["photo_crops"]
    want = pld([accounting.Mechanism(0.05, 1.1, 40), accounting.Mechanism(0.1, 2.0, 25)])
    assert photos["releases"] == 2 and photos["epsilon"] == pytest.approx(want, rel=1e-9)
    alone = pld([accounting.Mechanism(0.05, 1.1, 40)])
    assert by_data["image_folder /data/cifar10/train"]["epsilon"] == pytest.approx(alone, rel=1e-9)
    assert photos["epsilon"] > alone


def test_runs_of_one_mechanism_compose_as_their_summed_steps():
    # Three seeds of one (q, sigma): one event of 3 T steps, the same as three runs of T.
    records = [{"privacy": ledger(name)} for name in "xyz"]
    (total,) = totals(records)
    separate = pld([accounting.Mechanism(0.05, 1.1, 40)] * 3)
    assert total["releases"] == 3 and total["epsilon"] == pytest.approx(separate, rel=1e-3)


def test_a_run_published_twice_counts_once_and_an_unnamed_one_counts_each_time():
    named = [{"privacy": ledger("a")}, {"metrics": {"privacy": ledger("a")}}]
    assert [t["releases"] for t in totals(named)] == [1]
    unnamed = [{"privacy": ledger(None)}, {"privacy": ledger(None)}]  # results from before runs were named
    assert [t["releases"] for t in totals(unnamed)] == [2]
    assert list(releases([{"privacy": ledger("a", data=None)}])) == [UNNAMED]


def test_a_run_without_noise_is_no_release():
    assert totals([{"privacy": ledger("a", noise_multiplier=0.0)}, {"privacy": ledger("b", steps_done=0)}]) == []


def test_the_private_probe_composes_its_steps_and_its_mean():
    # Full batch: PLD gives the exact Gaussian answer, which the probe's own epsilon is.
    probe = {"sigma_mean": 3.0, "sigma_sgd": 20.0, "steps": 50, "delta": 1e-5, "epsilon": 0.0}
    probe |= {"randomness": "secret", "private": True, "data": "photo_crops", "run": "p"}
    (total,) = totals([{"privacy": probe}])
    assert total["epsilon"] == pytest.approx(composed_epsilon(3.0, 20.0, 50, 1e-5), rel=1e-6)


def test_the_statement_gives_each_outputs_total_and_the_bundles():
    shared = ledger("shared")
    sources = {
        "mehta_table5": [{"privacy": shared}, {"privacy": ledger("m2", q=0.2, sigma=3.0)}],
        "dprandp_table1": [{"privacy": shared}, {"privacy": ledger("r2")}, {"privacy": ledger("r", data="cifar10")}],
    }
    statement = build_statement(["tables/mehta_table5.csv", "tables/dprandp_table1.csv"], sources)
    entries = {e["output"]: e for e in statement["outputs"]}
    (mehta,) = entries["mehta_table5"]["total_epsilon"]
    assert mehta["releases"] == 2
    bundle = {t["data"]: t for t in statement["total_epsilon"]}
    assert bundle["photo_crops"]["releases"] == 3  # shared, m2 and r2: the shared run once
    assert bundle["photo_crops"]["outputs"] == ["dprandp_table1", "mehta_table5"]
    assert bundle["cifar10"]["outputs"] == ["dprandp_table1"]
    want = pld([accounting.Mechanism(0.05, 1.1, 80), accounting.Mechanism(0.2, 3.0, 40)])
    assert bundle["photo_crops"]["epsilon"] == pytest.approx(want, rel=1e-9)
    text = render(statement)
    assert "## Everything published together" in text
    assert f"| photo_crops | 3 | {want:.4g} |" in text
    assert f"all 2 DP release(s) on photo_crops composed: epsilon {mehta['epsilon']:.4g}" in text


def test_a_tables_notes_give_its_total():
    (note,) = privacy_notes([{"privacy": ledger("a")}, {"privacy": ledger("b")}])
    assert note.startswith("the 2 DP release(s) behind this output on photo_crops compose to epsilon")
