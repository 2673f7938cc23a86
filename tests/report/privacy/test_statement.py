"""The privacy statement's rules: every published output's status pinned (a training loss
marked inside the guarantee fails here), the unit and neighbouring relation stated with the
exact counts outside, a tuning grid's composed epsilon beside one run's, and an output
claimed inside the guarantee with no ledger behind it refused."""

import pytest

from dpvip.errors import DpvipInputError
from dpvip.privacy import accounting
from dpvip.report.privacy.grid import grid_compositions, grid_notes
from dpvip.report.privacy.statement import build_statement, render, status

# (output, derived from private data, inside the guarantee): one per rule of STATUSES, and
# every loss table and curve, which are computed on private batches without noise.
PINNED = [
    ("privacy_audit", False, ""),
    ("privacy_empirical", False, ""),
    ("synthetic_samples", False, ""),
    ("syn_vip_loss", False, ""),
    ("vip_table3", False, ""),
    ("vip_figure6", False, ""),
    ("provenance", True, "no"),  # DP jobs' times follow their realised Poisson batches
    ("Snakefile", False, ""),
    ("config", False, ""),
    ("ro-crate-metadata", False, ""),
    ("coverage", False, ""),
    ("compute_budget_papers", False, ""),
    ("claims", True, "no"),
    ("vip_claims", True, "no"),
    ("README", True, "no"),
    ("vip_dp_runs", True, "no"),
    ("vip_figure3a", True, "no"),
    ("vip_figure3b", True, "no"),
    ("vip_figure4a", True, "no"),
    ("vip_figure4b", True, "no"),
    ("vip_figure7", True, "no"),
    ("vip_table5", True, "yes"),
    ("vip_table1", True, "partly"),  # prints the exact n, which the counts note puts outside
    ("vip_table10", True, "partly"),
    ("vip_table6", True, "yes"),
    ("vip_figure1", True, "yes"),
    ("dprandp_table3", True, "partly"),
    ("dprandp_table4", True, "partly"),
    ("dprandp_figure5", True, "no"),
    ("dprandp_figure7", False, ""),
    ("dprandp_table8", True, "no"),  # job times, as provenance.json
    ("mehta_table6", False, ""),
    ("mehta_table7", False, ""),
    ("mehta_table10", True, "no"),
    ("dprandp_table1", True, "partly"),
    ("dprandp_claims", True, "partly"),
    ("mehta_table5", True, "partly"),
    ("mehta_claims", True, "partly"),
    ("report", True, "partly"),
]


@pytest.mark.parametrize(("output", "private_data", "inside"), PINNED)
def test_every_published_outputs_status_is_pinned(output, private_data, inside):
    found = status(output)
    assert (found.private_data, found.inside) == (private_data, inside)


def ledger(randomness="secret", **changes) -> dict:
    record = {"accountant": "pld", "sample_rate": 1.0, "noise_multiplier": 4.0, "clip_norm": 1.0}
    record |= {"delta": 1e-5, "steps_done": 10, "epsilon_spent": 2.0, "examples": 5000}
    return record | {"randomness": randomness, "private": randomness == "secret"} | changes


def test_the_statement_names_the_unit_the_relation_and_the_counts_left_outside():
    statement = build_statement(["tables/mehta_table5.csv"], {"mehta_table5": [ledger()]})
    assert statement["unit"].startswith("one image") and statement["private"]
    relation = statement["relation"]
    assert relation["neighbouring"].startswith("add/remove one example")
    assert relation["exact_counts"] == "published, outside the guarantee"
    assert any("realised Poisson batch sizes" in count for count in relation["counts_published"])
    assert "2C" in relation["sensitivity"]  # why replace-one is not claimed
    text = render(statement)
    assert "**Neighbouring datasets:** add/remove one example" in text and "outside the guarantee" in text


def test_a_tuning_grid_of_runs_on_the_same_data_is_composed():
    """Mehta et al.'s cells: the best of a learning-rate grid on test accuracy. Five runs of
    one mechanism compose (PLD) to more than one run's epsilon, as the accountant says."""
    runs = [{"runs": [{"result": {"privacy": ledger()}} for _ in range(5)]}]
    (grid,) = grid_compositions(runs)
    expected = accounting.epsilon([accounting.Mechanism(1.0, 4.0, 10)] * 5, 1e-5, "pld").epsilon
    assert grid["runs"] == 5 and grid["composed_epsilon"] == pytest.approx(expected)
    assert grid["composed_epsilon"] > 2 * grid["single_run_epsilon"]
    (note,) = grid_notes(runs)
    assert "grid's 5 runs compose to epsilon" in note
    statement = build_statement(["tables/mehta_table5.csv"], {"mehta_table5": runs})
    (entry,) = statement["outputs"]
    assert entry["grid_composition"] == [grid]
    assert f"composed epsilon {grid['composed_epsilon']:.4g}" in render(statement)
    assert grid_compositions([{"privacy": ledger()}]) == []  # one run: nothing to compose


def test_an_output_claimed_inside_the_guarantee_needs_a_ledger_behind_it():
    with pytest.raises(DpvipInputError, match="'vip_table1' is said to be inside the DP guarantee but no DP run"):
        build_statement(["tables/vip_table1.csv"], {})
    # an output outside the guarantee may rest on runs without noise (no ledger)
    statement = build_statement(["figures/vip_figure3a.png"], {})
    assert not statement["private"] and "note" not in statement


def test_the_report_inherits_the_mechanisms_of_its_parts():
    statement = build_statement(
        ["tables/mehta_table5.csv", "report/report.html"], {"mehta_table5": [ledger(), ledger(epsilon_spent=1.0)]}
    )
    report = next(entry for entry in statement["outputs"] if entry["output"] == "report")
    assert len(report["mechanisms"]) == 2


@pytest.mark.parametrize("mode", ["validation", "test", None])
def test_the_statement_says_how_each_grid_was_picked(mode):
    """On a held-out validation share (the default) nothing is picked on test data, and the
    held-out examples are said to be outside the guarantee; on test (or a result that records
    no selection: an older one) the pick is on test data, as the papers did."""
    selection = {"selection": {"mode": mode}} if mode else {}
    study = {"runs": [{"result": {"privacy": ledger()}}]} | selection
    probe = {"evaluation": {"task": "linear_probe"}, "columns": {}} | selection
    statement = build_statement(
        ["tables/mehta_table1.csv", "tables/vip_table1.csv"],
        {"mehta_table1": [study], "vip_table1": [probe, {"privacy": ledger()}]},
    )
    entries = {entry["output"]: entry for entry in statement["outputs"]}
    for output, picked in (("mehta_table1", "learning rate picked on "), ("vip_table1", "linear-probe learning rate")):
        entry = entries[output]
        assert entry["hyperparameter_selection"].startswith(picked)
        if mode == "validation":
            assert entry["hyperparameters_on_test_data"] is None
            assert "validation" in entry["hyperparameter_selection"]
        else:
            assert entry["hyperparameters_on_test_data"] == entry["hyperparameter_selection"]
            assert "test" in entry["hyperparameters_on_test_data"]
    if mode == "validation":
        assert "outside the guarantee" in entries["mehta_table1"]["hyperparameter_selection"]
    assert entries["mehta_table1"]["hyperparameter_selection"] in render(statement)
