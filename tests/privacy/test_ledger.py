"""The privacy ledger: sigma calibrated before training, the epsilon spent so far, a budget
that cannot be overspent, and resuming only the same mechanism."""

import json
from dataclasses import replace

import pytest

from dpvip.errors import DpvipInputError
from dpvip.privacy import accounting
from dpvip.privacy.ledger import BudgetExceeded, PrivacyLedger

Q, STEPS, EPSILON, DELTA, CLIP = 0.05, 100, 8.0, 1e-5, 1.0


@pytest.fixture(scope="module")
def ledger() -> PrivacyLedger:
    return PrivacyLedger.calibrate("rdp", Q, STEPS, EPSILON, DELTA, CLIP)


def spent(accountant, sigma, steps):
    return accounting.epsilon([accounting.Mechanism(Q, sigma, steps)], DELTA, accountant).epsilon


def test_calibration_spends_the_target_at_the_planned_steps(ledger):
    assert (ledger.accountant, ledger.sample_rate, ledger.clip_norm, ledger.delta) == ("rdp", Q, CLIP, DELTA)
    assert (ledger.target_epsilon, ledger.planned_steps, ledger.steps_done) == (EPSILON, STEPS, 0)
    at_plan = spent("rdp", ledger.noise_multiplier, STEPS)
    assert EPSILON - 0.05 < at_plan <= EPSILON
    # The calibrated sigma is (nearly) the smallest: 2% less noise overspends.
    assert spent("rdp", ledger.noise_multiplier * 0.98, STEPS) > EPSILON


def test_a_given_sigma_makes_the_budget_what_the_planned_steps_spend():
    given = PrivacyLedger.for_noise("rdp", Q, 1.3, STEPS, DELTA, CLIP)
    assert (given.noise_multiplier, given.planned_steps, given.steps_done, given.clip_norm) == (1.3, STEPS, 0, CLIP)
    assert given.target_epsilon == pytest.approx(spent("rdp", 1.3, STEPS))
    assert given.charge(STEPS).epsilon_spent() == given.target_epsilon
    with pytest.raises(BudgetExceeded):
        given.charge(STEPS + 1)
    with pytest.raises(DpvipInputError, match="noise multiplier"):
        PrivacyLedger.for_noise("rdp", Q, 0.0, STEPS, DELTA, CLIP)


def test_epsilon_spent_uses_the_ledgers_accountant(ledger):
    # prv's calibration is accounting.noise_multiplier's (tested there); here only that the
    # ledger asks its own accountant, which for these settings differs from rdp's answer.
    prv = replace(ledger, accountant="prv", steps_done=STEPS)
    assert prv.epsilon_spent() == pytest.approx(spent("prv", ledger.noise_multiplier, STEPS))
    assert prv.epsilon_spent() < replace(prv, accountant="rdp").epsilon_spent() - 0.3


def test_epsilon_spent_starts_at_zero_and_grows_with_the_steps(ledger):
    assert ledger.epsilon_spent() == 0.0
    values = [ledger.charge(steps).epsilon_spent() for steps in (1, 10, 50, STEPS)]
    assert values == sorted(values) and len(set(values)) == 4 and values[0] > 0
    assert values[-1] == pytest.approx(spent("rdp", ledger.noise_multiplier, STEPS))
    assert values[-1] <= EPSILON


def test_charge_counts_steps_and_refuses_to_pass_the_budget(ledger):
    after = ledger.charge()
    assert after.steps_done == 1 and ledger.steps_done == 0  # a new ledger; the old one is unchanged
    assert after.charge(4).steps_done == 5
    full = ledger
    for _ in range(STEPS):
        full = full.charge()
    assert full.steps_done == STEPS
    with pytest.raises(BudgetExceeded, match="budget") as raised:
        full.charge()
    assert isinstance(raised.value, DpvipInputError)
    assert f"{STEPS} steps" in str(raised.value) and "epsilon 8.0" in str(raised.value)
    with pytest.raises(BudgetExceeded):
        ledger.charge(STEPS + 1)  # several steps at once, too


def test_record_round_trips_and_carries_the_spent_epsilon(ledger):
    charged = ledger.charge(30)
    record = json.loads(json.dumps(charged.record()))  # as stored in a checkpoint or metrics file
    assert record["steps_done"] == 30
    assert record["epsilon_spent"] == pytest.approx(charged.epsilon_spent())
    assert record["noise_multiplier"] == ledger.noise_multiplier
    assert PrivacyLedger.from_record(record) == charged


@pytest.mark.parametrize(
    "key, value",
    [
        ("sample_rate", 0.06),
        ("noise_multiplier", 0.8),
        ("clip_norm", 2.0),
        ("accountant", "prv"),
        ("delta", 1e-6),
        ("target_epsilon", 4.0),
        ("planned_steps", 200),
    ],
)
def test_resume_refuses_another_mechanism_naming_the_key(ledger, key, value):
    stored = ledger.charge(40)
    changed = replace(ledger, **{key: value})
    with pytest.raises(DpvipInputError, match=rf"ckpt\.pt was trained with {key} "):
        changed.check_resume(stored, "ckpt.pt")


def test_resume_accepts_the_same_mechanism_at_any_step(ledger):
    stored = PrivacyLedger.from_record(ledger.charge(40).record())
    # A resumed run calibrates again: the same settings give exactly the same sigma.
    again = PrivacyLedger.calibrate("rdp", Q, STEPS, EPSILON, DELTA, CLIP)
    assert again == ledger
    again.check_resume(stored, "ckpt.pt")
    stored.check_resume(ledger.charge(STEPS), "ckpt.pt")
