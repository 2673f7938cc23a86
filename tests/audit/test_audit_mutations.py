"""Bugs caught at the workflow's own settings: each injected bug (tests/privacy/mutations.py)
makes the embedded audit (`audit_mechanism` at `AuditSettings()`'s canaries, runs and
guesses, as the workflow runs it) report a valid lower bound above the epsilon the buggy run
claims, for at least one mechanism the bug affects. The mechanisms are the embedded runs'
(their q, T, sigma, C, delta and accountant as results/tables/privacy_empirical.csv shows them).

What stays below the claim at embedded power, and why (measured on simulated scores of the
same law, 1.28M trials of a subsampled mechanism, 64,000 of a full-batch one):
- noise halved in a full-batch step (Mehta's head, epsilon 8): tight bound 6.1. Its power is
  8.4 (no false positive among the 16,000 bounding non-members), and a bound above 8 needs
  e^8 / e^8.4 = 69% of members above such a threshold (about 4 noise deviations); with
  sigma / 2 a member's shift is 3 deviations, and under 20% pass it;
- a layer left unclipped in a full-batch step: half the canaries (one layer's) are separated
  perfectly, which gives power - log 2 = 7.7 < 8;
- noise of sigma C / world on each of 2 ranks (sigma / sqrt 2 in the sum): 6.6-6.8 for the
  three subsampled mechanisms, 4.6 for Mehta's head (the Gaussian trade-off estimate, which
  assumes what a full-batch step is, catches it: tests/privacy/test_canaries.py); 4 ranks
  (sigma / 2 in the sum) are caught below;
- a step not charged, where T is large: 99 of the probe's 100 steps claim 7.95 of its 8.
"""

from __future__ import annotations

import pytest
from mutations import halve_noise, leave_a_step_uncharged, noise_on_every_rank, unclipped_second_layer

from dpvip.audit.bounds import VALID_BOUNDS, AuditSettings
from dpvip.audit.canaries import AuditMechanism, audit_mechanism

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("torch_one_thread")]

DP_FINETUNE = AuditMechanism("dp_finetune", "rdp", 256 / 1437, 12, 7.87, 1 / 2874, 0.1, 0.72)
SEED = 35  # the white-box runs seeded (NOT private): the tests repeat
MEHTA_HEAD = AuditMechanism("mehta_head", "prv", 1.0, 1, 8.0, 1e-6, 1.0, 0.6529353843582161)


def largest_valid_bound(record: dict) -> tuple[str, float]:
    key = max(VALID_BOUNDS, key=lambda key: record[key])
    print(
        f"{record['mechanism']}: claimed {record['claimed_epsilon']:.2f}, {key} {record[key]:.2f} "
        f"(power {record[f'{key}_power']:.2f})"
    )
    return key, record[key]


def test_noise_halved_is_caught_in_dp_finetuning(monkeypatch):
    """Seeded: tight white-box 8.80 against 7.87 (8.1-9.4 over 6 secret keys)."""
    halve_noise(monkeypatch)
    record = audit_mechanism(DP_FINETUNE, AuditSettings(), seed=SEED)
    key, bound = largest_valid_bound(record)
    assert key == "tight_white_box" and bound > record["claimed_epsilon"]


def test_a_layer_left_unclipped_is_caught_in_dp_finetuning():
    """Canaries of 10 C in the unclipped layer shift their coordinate by 10 noise units' worth:
    every member drawn in is seen; seeded: 10.57 against 7.87."""
    record = audit_mechanism(DP_FINETUNE, AuditSettings(), seed=SEED, make_step=unclipped_second_layer)
    key, bound = largest_valid_bound(record)
    assert bound > record["claimed_epsilon"]


def test_a_step_not_charged_is_caught_in_a_single_step_head(monkeypatch):
    """Mehta's single full-batch step charged as none: the run claims epsilon 0; seeded: 3.30."""
    leave_a_step_uncharged(monkeypatch)
    record = audit_mechanism(MEHTA_HEAD, AuditSettings(), seed=SEED)
    key, bound = largest_valid_bound(record)
    assert record["claimed_epsilon"] == 0.0 and bound > 1.0


def test_noise_on_every_rank_is_caught_in_dp_finetuning_on_4_ranks(monkeypatch):
    """4 ranks (threads) each add sigma C / 4 and none is added after the all-reduce: sigma / 2
    in the sum, as with the noise halved; seeded: 8.85 against 7.87."""
    record = audit_mechanism(
        DP_FINETUNE, AuditSettings(), seed=SEED, make_step=noise_on_every_rank(monkeypatch), world=4
    )
    key, bound = largest_valid_bound(record)
    assert bound > record["claimed_epsilon"]


def test_the_same_audit_of_the_correct_step_stays_within_the_claim():
    """The seeds above without a bug: DP fine-tuning's valid bounds at or below its claim (tight
    white-box 4.50 against 7.87)."""
    record = audit_mechanism(DP_FINETUNE, AuditSettings(), seed=SEED)
    key, bound = largest_valid_bound(record)
    assert bound <= record["claimed_epsilon"]
