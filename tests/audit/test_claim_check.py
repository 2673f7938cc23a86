import dataclasses

import pytest

from dpvip.privacy.gaussian import composed_sigma
from dpvip.audit.claim_check import audit_claim, verdict
from dpvip.report.privacy.audit import audit_frame, audit_notes
from dpvip.audit.claims import load_claims


@pytest.fixture(scope="module")
def claims(root):
    return {c.id: c for c in load_claims(root / "config/paper_values/privacy_claims.yaml")}


def test_verdict_rounding():
    assert verdict(7.99, 8.0) == "holds"
    assert verdict(8.03, 8.0) == "holds (rounding)"
    assert verdict(8.1, 8.0) == "fails"


def test_mehta_derived_sigma_holds_under_rdp_and_exact_accounting_saves_noise(claims):
    row = audit_claim(claims["mehta_fullbatch_eps4_delta1.0e-6"])
    assert row["sigma_printed"] is False
    assert row["sigma"] == pytest.approx(row["sigma_needed_rdp"], rel=1e-3)
    assert row["verdict"] == "holds"
    assert row["sigma_needed_pld"] == pytest.approx(row["sigma_needed_prv"])  # both exact at q = 1
    assert row["noise_saving_pct"] > 5


def test_composed_claim_is_audited_as_its_exact_gaussian_equivalent(claims):
    row = audit_claim(claims["dprandp_t23_eps1"])
    assert row["q"] == 1.0 and row["steps"] == 1
    assert row["sigma"] == pytest.approx(composed_sigma([(71, 1), (43, 100)]))
    assert row["epsilon_prv"] <= 1.0 and row["verdict"] == "holds"
    assert "sigma=71 x 1 step(s)" in row["assumptions"]


def test_dprandp_linear_probe_cifar10_holds(claims):
    row = audit_claim(claims["dprandp_t22_eps1"], accountants=("prv",))
    assert row["epsilon_prv"] <= 1.0 and row["verdict"] == "holds"
    assert "epsilon_rdp" not in row


def test_notes_name_failing_claims():
    import pandas as pd

    frame = pd.DataFrame({"claim": ["a", "b"], "verdict": ["holds", "fails"], "delta_at_least_1_over_n": [True, False]})
    notes = audit_notes(frame)
    assert notes[-2].endswith("b.") and notes[-1].endswith(": a.")


def test_a_delta_of_at_least_one_over_n_is_flagged(claims):
    """Mehta et al.'s delta 1e-6 on ImageNet's 1,281,167 images is above 1/n; DP-RandP's 7.8e-7 is not."""
    mehta = audit_claim(claims["mehta_fullbatch_eps1_delta1.0e-6"], accountants=("pld",))
    assert mehta["delta_n"] == pytest.approx(1.281167) and mehta["delta_at_least_1_over_n"] is True
    randp = audit_claim(claims["dprandp_t23_eps1"], accountants=("pld",))
    assert randp["delta_n"] == pytest.approx(0.99931, rel=1e-4) and randp["delta_at_least_1_over_n"] is False


def test_the_verdict_accountant_is_a_column_even_when_the_audit_leaves_it_out(claims):
    """DP-RandP used PRV; an audit under RDP and PLD alone still shows PRV's epsilon, the one
    its verdict is decided on (no sigma calibration under PRV: only the configured ones)."""
    claim = claims["dprandp_t22_eps1"]
    row = audit_claim(claim, accountants=("pld",))
    assert row["paper_accountant"] == "prv" and "epsilon_prv" in row and "sigma_needed_prv" not in row
    assert row["verdict"] == verdict(row["epsilon_prv"], claim.epsilon)


def test_the_merged_audit_puts_every_epsilon_column_before_the_verdict():
    import pandas as pd

    base = {"claim": "x", "paper_accountant": "rdp", "verdict": "holds", "assumptions": ""}
    vip = pd.DataFrame([base | {"epsilon_rdp": 8.0, "epsilon_pld": 7.0}])
    randp = pd.DataFrame(
        [base | {"claim": "y", "paper_accountant": "prv", "epsilon_rdp": 1.1, "epsilon_pld": 0.9, "epsilon_prv": 0.95}]
    )
    frame = audit_frame([vip, randp])
    columns = list(frame.columns)
    assert columns == [
        "claim",
        "paper_accountant",
        "epsilon_rdp",
        "epsilon_prv",
        "epsilon_pld",
        "verdict",
        "assumptions",
    ]
    for _, row in frame.iterrows():  # the verdict's accountant is filled in every row
        assert not pd.isna(row[f"epsilon_{row['paper_accountant']}"])


def test_a_failure_that_printed_rounding_explains_holds_and_one_on_assumed_values_says_so(claims):
    """ViP's Table 10 rows failed under RDP at the printed sigma and n; the sigma that meets
    epsilon 8 at batch 8,192 is 0.4141, printed 0.41; 23.5M images print as 23M. Without a
    precision, a failure on assumed values is said to rest on them."""
    from dpvip.audit.claim_check import claim_verdict

    for name in ("vip_table10_n23m", "vip_table10_b8192", "vip_table10_n2m"):
        row = audit_claim(claims[name], ("rdp",))
        assert row["epsilon_rdp"] > 8.04 and row["epsilon_favourable_rounding"] <= 8.0, name
        assert row["verdict"].startswith("holds (printed precision: sigma to 0.01"), name
    exact = dataclasses.replace(claims["vip_table10_n2m"], favourable=None)
    assert claim_verdict(exact, 9.5)[0] == "fails under our assumptions (T = 6100, n = 2000000)"
    assert claim_verdict(dataclasses.replace(exact, assumed=()), 9.5)[0] == "fails"
