"""Black-box input canaries (dpvip.audit.input_canaries): the dots sit where no digit is; a
run with almost no noise gives its members away from the final model alone; a correct run
stays at or below its claim; the MAE's noise canaries go through the same DP step."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dpvip.errors import DpvipInputError
from dpvip.audit.bounds import one_run_bound
from dpvip.audit.canaries import AuditMechanism
from dpvip.audit.input_canaries import black_box_run, classifier_data, free_positions
from dpvip.privacy.randomness import RunRandomness

pytestmark = pytest.mark.usefixtures("torch_one_thread")

HEAD = AuditMechanism("mehta_head", "prv", 1.0, 1, 2.0, 1e-6)  # one full-batch step
CANARIES, GUESSES = 700, 50


def bound(run, delta: float) -> float:
    return one_run_bound(run.scores, run.included, GUESSES, delta)[1]


def test_the_canaries_dots_lie_where_no_digit_is():
    inputs, labels, dots, dot_labels = classifier_data(CANARIES, np.random.default_rng(0))
    free = free_positions()
    assert len(free) == 32 * 32 - 16 * 16 and float(inputs[:, free].abs().sum()) == 0.0
    assert (dots > 0).sum(dim=1).tolist() == [1] * CANARIES  # one dot each, on distinct free pixels
    lit = dots.argmax(dim=1).numpy()
    assert len(set(lit)) == CANARIES and set(lit) <= set(free)
    assert len(inputs) == len(labels) == 1797 and set(dot_labels.tolist()) == set(range(10))


def test_an_almost_noiseless_run_gives_its_members_away():
    run = black_box_run(replace(HEAD, epsilon=50.0), CANARIES, randomness=RunRandomness.seeded(1))
    found = bound(run, HEAD.delta)
    print(f"epsilon 50: black-box bound {found:.2f}")  # measured 3.49: every guess right
    assert found > 3.0


def test_a_correct_run_stays_at_or_below_its_claim():
    bounds = [bound(black_box_run(HEAD, CANARIES, randomness=RunRandomness.seeded(k)), HEAD.delta) for k in range(3)]
    print("epsilon 2: black-box bounds", [round(b, 2) for b in bounds])
    assert all(b <= HEAD.epsilon for b in bounds)


def test_the_mae_canaries_go_through_the_dp_step():
    mae = AuditMechanism("dp_mae", "rdp", 0.0625, 4, 8.0, 2.4e-4, 0.1)
    run = black_box_run(mae, 100, randomness=RunRandomness.seeded(3))
    assert run.epsilon_spent == pytest.approx(8.0, rel=1e-3) and np.isfinite(run.scores).all()
    assert run.scores.std() > 0  # training moved the reconstruction of the noise images
    assert bound(run, mae.delta) <= mae.epsilon


def test_more_canaries_than_free_pixels_are_refused():
    with pytest.raises(DpvipInputError, match="black-box canaries 800 exceed the 768 free pixels"):
        black_box_run(HEAD, 800)
