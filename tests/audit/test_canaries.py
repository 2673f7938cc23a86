"""White-box gradient canaries through the real DP step (dpvip.audit.canaries): the scores
have the law the mechanism promises; a correct run's audit stays at or below its claimed
epsilon; and each injected bug (noise halved, a layer left unclipped, a step not charged)
makes the one-run audit's lower bound exceed the epsilon the run claims.

The audited mechanism: one full-batch step at epsilon 2, delta 1e-6 (PRV, exact here),
40,000 canaries; guesses on the 200 highest and 200 lowest scores (fixed in advance). The
runs are seeded, so the tests repeat; measured over 15 secret keys each: a correct run's
bound 1.02-1.29, with the noise halved 2.32-2.97."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from mutations import halve_noise, leave_a_step_uncharged, noise_on_every_rank, unclipped_second_layer

from dpvip.errors import DpvipInputError
from dpvip.audit import bounds as auditing
from dpvip.audit.canaries import AuditMechanism, audit_run
from dpvip.privacy.randomness import RunRandomness

pytestmark = pytest.mark.usefixtures("torch_one_thread")

MECHANISM = AuditMechanism("mehta_head", "prv", 1.0, 1, 2.0, 1e-6)  # a full-batch step
CANARIES, WIDTH, GUESSES = 40_000, 150, 200
SEEDED = RunRandomness.seeded(2024)  # NOT private: a repeatable audit for the tests


def one_run_bound(run) -> float:
    return auditing.one_run_bound(run.scores, run.included, GUESSES, MECHANISM.delta)[1]


def test_scores_have_the_promised_law():
    """Each inclusion shifts a score by 1 (C / (q n) in the gradient); the noise is sigma."""
    run = audit_run(MECHANISM, CANARIES, WIDTH)  # a fresh secret key
    inside, outside = run.sums[run.included], run.sums[~run.included]
    assert abs(run.included.mean() - 0.5) < 0.01
    assert inside.mean() - outside.mean() == pytest.approx(1.0, abs=5 * run.noise_multiplier / 140)
    assert outside.std() == pytest.approx(run.noise_multiplier, rel=0.02)
    assert run.epsilon_spent == pytest.approx(2.0, rel=1e-6)


def test_a_correct_run_stays_at_or_below_its_claim():
    bounds = [
        one_run_bound(audit_run(MECHANISM, CANARIES, WIDTH, randomness=RunRandomness.seeded(k))) for k in range(3)
    ]
    print("correct run: one-run bounds", [round(b, 2) for b in bounds], "claimed", MECHANISM.epsilon)
    assert all(b <= MECHANISM.epsilon for b in bounds)
    assert min(bounds) > 0.5  # and the audit sees the noise level: measured 0.9-1.1


def test_noise_halved_is_caught(monkeypatch):
    halve_noise(monkeypatch)
    run = audit_run(MECHANISM, CANARIES, WIDTH, randomness=SEEDED)
    bound = one_run_bound(run)
    print(f"noise halved: claimed {run.epsilon_spent:.2f}, audit {bound:.2f}")  # measured 2.2-2.5
    assert bound > run.epsilon_spent


def test_a_layer_left_unclipped_is_caught():
    """Canaries of 10 C: clipped to C, except in the second layer, whose gradients the buggy
    clipper neither counts in the norm nor scales. The median of 3 seeded runs: one run's
    bound is 1.99-2.55 over 6 seeds (one under the claim of 2), the correct clipper's
    1.0-1.3."""
    runs = [
        audit_run(
            MECHANISM, CANARIES, WIDTH, scale=10.0, randomness=RunRandomness.seeded(k), make_step=unclipped_second_layer
        )
        for k in (2024, 2025, 2026)
    ]
    bound = float(np.median([one_run_bound(run) for run in runs]))
    print(f"second layer unclipped: claimed {runs[0].epsilon_spent:.2f}, audit (median of 3) {bound:.2f}")
    assert bound > runs[0].epsilon_spent
    # the same canaries against the correct clipper: nothing to see beyond the claim
    assert one_run_bound(audit_run(MECHANISM, CANARIES, WIDTH, scale=10.0, randomness=SEEDED)) <= MECHANISM.epsilon


def test_a_step_taken_but_not_charged_is_caught(monkeypatch):
    """T - 1 steps charged for T taken; with T = 1 the run claims epsilon 0."""
    leave_a_step_uncharged(monkeypatch)
    run = audit_run(MECHANISM, CANARIES, WIDTH, randomness=SEEDED)
    bound = one_run_bound(run)
    print(f"uncharged step: claimed {run.epsilon_spent:.2f}, audit {bound:.2f}")
    assert run.epsilon_spent == 0.0 and bound > run.epsilon_spent


def test_noise_on_every_rank_is_caught(monkeypatch):
    """Each of 2 ranks adds its own noise of std sigma C / 2 before the summing all-reduce: the
    sum carries sigma C / sqrt 2. The one-run bound misses it (measured 1.61-1.79 against 2);
    the Gaussian trade-off of the same run's 40,000 canaries does not (measured 2.80-2.89)."""
    from dpvip.audit.bounds import gdp_epsilon

    run = audit_run(MECHANISM, CANARIES, WIDTH, randomness=SEEDED, make_step=noise_on_every_rank(monkeypatch), world=2)
    assert run.sums[~run.included].std() == pytest.approx(run.noise_multiplier / 2**0.5, rel=0.03)
    bound = gdp_epsilon(run.scores[run.included], run.scores[~run.included], MECHANISM.delta)
    print(f"noise on every rank: claimed {run.epsilon_spent:.2f}, audit {bound:.2f}")
    assert bound > run.epsilon_spent
    monkeypatch.undo()  # the same 2-rank run without the bug: within its claim
    correct = audit_run(MECHANISM, CANARIES, WIDTH, randomness=SEEDED, world=2)
    assert gdp_epsilon(correct.scores[correct.included], correct.scores[~correct.included], MECHANISM.delta) <= 2.0


def test_the_likelihood_ratio_score_is_the_mixture_against_the_noise():
    from scipy import stats

    from dpvip.audit.canaries import likelihood_ratio

    y = np.array([[0.3, -1.0, 2.5], [1.2, 0.0, -0.4]])  # T = 2 steps, 3 canaries
    q, sigma = 0.1, 0.8
    mixture = (1 - q) * stats.norm.pdf(y, 0, sigma) + q * stats.norm.pdf(y, 1, sigma)
    expected = np.log(mixture / stats.norm.pdf(y, 0, sigma)).sum(axis=0)
    np.testing.assert_allclose(likelihood_ratio(y, q, sigma).sum(axis=0), expected, rtol=1e-12)
    # full batch: the shifted, scaled sum
    np.testing.assert_allclose(likelihood_ratio(y, 1.0, sigma).sum(axis=0), (y.sum(axis=0) - 1.0) / sigma**2)


def test_per_step_scores_see_what_a_summed_score_dilutes():
    """DP-RandP Phase III at the embedded settings (q 0.099, T 24, sigma 0.70, epsilon 8 at
    1e-5), 20 seeded runs of 12,800 canaries: the tight bound from each canary's likelihood
    ratio over its 24 steps against the one from its summed score (measured 3.72 and 2.78)."""
    mechanism = AuditMechanism("dprandp_phase3", "prv", 0.09899, 24, 8.0, 1e-5, 1.0, 0.6997)
    runs = [audit_run(mechanism, 12_800, 80, randomness=RunRandomness.seeded(100 + k)) for k in range(20)]
    included = np.concatenate([run.included for run in runs])
    per_step = np.concatenate([run.scores for run in runs])
    summed = np.concatenate([run.sums for run in runs])
    bounds = [auditing.tight_epsilon(s[included], s[~included], mechanism.delta) for s in (per_step, summed)]
    print(f"Phase III, 256,000 trials: tight bound per-step {bounds[0]:.2f}, summed {bounds[1]:.2f}")
    assert bounds[0] > bounds[1] + 0.5 and bounds[0] > 3.0


def test_two_ranks_give_the_scores_of_one():
    """Ranks draw their blocks of the Poisson batch, their sums are all-reduced and the noise is
    added once: a 2-rank run (ranks as threads) is the 1-rank run, score for score."""
    one = audit_run(MECHANISM, 4000, 50, randomness=SEEDED)
    two = audit_run(MECHANISM, 4000, 50, randomness=SEEDED, world=2)
    np.testing.assert_allclose(two.scores, one.scores, atol=1e-5)
    assert np.array_equal(two.included, one.included) and two.epsilon_spent == one.epsilon_spent


def test_every_audit_run_draws_its_own_canaries_and_noise():
    first, second = audit_run(MECHANISM, 1000, 40), audit_run(MECHANISM, 1000, 40)
    assert not np.array_equal(first.included, second.included)
    assert not np.allclose(first.scores, second.scores)


@pytest.mark.parametrize(
    "mechanism, canaries, message",
    [
        (replace(MECHANISM, epsilon=0.0), 100, "epsilon 0.0 must be positive"),
        (MECHANISM, 101, "canaries 101 must be an even number"),
        (MECHANISM, 0, "canaries 0 must be an even number"),
        (replace(MECHANISM, sample_rate=1.5), 100, "sample rate 1.5"),
    ],
)
def test_bad_audits_are_refused_in_one_line(mechanism, canaries, message):
    with pytest.raises(DpvipInputError, match=message):
        audit_run(mechanism, canaries, 40)


def test_a_mechanism_is_read_from_each_kind_of_run_record():
    from dpvip.audit.canaries import mechanism_from_ledger

    dp = {"accountant": "rdp", "sample_rate": 0.0625, "noise_multiplier": 0.9, "planned_steps": 16}
    dp |= {"epsilon_spent": 7.9, "delta": 1 / 4096, "clip_norm": 0.1, "randomness": "secret", "private": True}
    assert mechanism_from_ledger("dp_mae", dp) == AuditMechanism("dp_mae", "rdp", 0.0625, 16, 7.9, 1 / 4096, 0.1, 0.9)
    study = {"runs": [{"result": {"privacy": None}}, {"result": {"privacy": dp | {"accountant": "prv"}}}]}
    assert mechanism_from_ledger("mehta_head", study).accountant == "prv"
    probe = {"sigma_sgd": 7.0, "steps": 100, "epsilon": 1.0, "delta": 1e-5, "clip_norm": 1.0}
    probe |= {"accountant": "gdp (exact, full batch)", "randomness": "secret", "private": True}
    found = mechanism_from_ledger("dprandp_probe", {"runs": [{"result": {"privacy": probe}}]})
    assert (found.accountant, found.sample_rate, found.steps, found.noise_multiplier) == ("pld", 1.0, 100, 7.0)
    with pytest.raises(DpvipInputError, match="holds no DP run's ledger"):
        mechanism_from_ledger("dp_mae", {"privacy": None})


def test_audit_mechanism_reports_both_bounds_beside_the_claim(monkeypatch):
    from dpvip.audit import canaries
    from dpvip.audit.bounds import AuditSettings
    from dpvip.audit.canaries import audit_mechanism

    tight_reads = []  # (confidence, chosen_at) of each tight read
    tight = canaries.tight_epsilon

    def recorded(*args, chosen_at=None):
        tight_reads.append((args[3], chosen_at))
        return tight(*args, chosen_at=chosen_at)

    monkeypatch.setattr(canaries, "tight_epsilon", recorded)
    record = audit_mechanism(MECHANISM, AuditSettings(canaries=4000, width=50, guesses=50, runs=2))
    # the headline reads the column's threshold (chosen at 0.95) at the stricter confidence
    assert tight_reads == [(0.95, None), (pytest.approx(1 - 0.05 / 3), 0.95)]
    assert record["claimed_epsilon"] == pytest.approx(2.0, rel=1e-6)
    # the tightest accountant of rdp and pld, beside the claim (PLD, within PRV's error of its 2.0)
    assert record["tightest_accountant"] == "pld" and record["tightest_epsilon"] == pytest.approx(2.0, abs=0.05)
    assert 0 <= record["one_run_white_box"] <= 2.0 and 0 <= record["tight_white_box"] <= 2.0
    assert record["trials"] == 2 * 4000 and record["guesses"] == 100 and record["runs"] == 2
    # the headline: the valid columns read at 1 - 0.05 / 3, so never above the largest of them
    assert record["headline_column_confidence"] == pytest.approx(1 - 0.05 / 3)
    valid = max(record[key] for key in ("one_run_white_box", "one_run_black_box", "tight_white_box"))
    assert 0 <= record["headline_epsilon"] <= valid and isinstance(record["split_seed"], int)
    with pytest.raises(DpvipInputError, match="guesses 3000 must be positive and at most half"):
        audit_mechanism(MECHANISM, AuditSettings(canaries=4000, width=50, guesses=3000))


def test_the_command_line_audits_a_mechanism_and_refuses_bad_input_in_one_line(tmp_path):
    import json

    from conftest import run_dpvip

    base = ["privacy", "audit-empirical", "--mechanism", "mehta_head", "--delta", "1e-6", "--sample-rate", "1"]
    done = run_dpvip(*base, "--epsilon", "2", "--steps", "1", "--canaries", "2000", "--width", "40", "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["mechanism"] == "mehta_head" and record["claimed_epsilon"] == pytest.approx(2.0, rel=1e-6)
    # each column's power beside it: 2,000 canaries and 50 + 50 guesses reach 3.49 at most
    assert record["one_run_white_box_power"] == pytest.approx(3.4875, abs=1e-4)
    assert record["tight_white_box_power"] > record["one_run_white_box_power"]
    text = run_dpvip(*base, "--epsilon", "8", "--steps", "1", "--canaries", "200", "--width", "10", "--runs", "1")
    assert text.returncode == 0, text.stderr
    assert "(power 3.49, cannot refute the claim)" in text.stdout, text.stdout  # one-run, at a claim of 8
    assert "white-box estimate (Gaussian trade-off, not a bound)" in text.stdout
    for extra, message in [
        (["--epsilon", "-1", "--steps", "1"], "argument --epsilon: must be positive (got -1)"),
        (["--epsilon", "2", "--steps", "1", "--canaries", "7"], "canaries 7 must be an even number"),
        (["--epsilon", "2", "--steps", "1", "--canaries", "0"], "canaries 0 must be an even number"),
        (["--steps", "1"], "give --ledger FILE, or --epsilon"),
        (["--ledger", str(tmp_path / "none.json")], "does not exist"),
    ]:
        bad = run_dpvip(*base, *extra)
        assert bad.returncode == 2 and message in bad.stderr and bad.stderr.count("\n") == 1, bad.stderr
    unknown = run_dpvip("privacy", "audit-empirical", "--mechanism", "dp_sgd", "--epsilon", "1")
    assert unknown.returncode == 2 and "invalid choice: 'dp_sgd'" in unknown.stderr
