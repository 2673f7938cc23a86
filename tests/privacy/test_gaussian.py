import math

import dp_accounting
import pytest

from dpvip.privacy import gaussian


def test_composed_sigma_is_dprandp_table23_formula():
    s1, s2, steps = 71.0, 43.0, 100
    expected = 1 / math.sqrt(1 / s1**2 + steps / s2**2)
    assert gaussian.composed_sigma([(s1, 1), (s2, steps)]) == pytest.approx(expected)


def test_t_steps_equal_one_step_with_sigma_over_sqrt_t():
    assert gaussian.composed_sigma([(10.0, 25)]) == pytest.approx(2.0)


@pytest.mark.parametrize("mu", [0.05, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-7])
def test_epsilon_and_delta_are_inverse(mu, delta):
    eps = gaussian.epsilon_for_delta(mu, delta)
    if eps > 0:
        assert gaussian.delta_for_epsilon(mu, eps) == pytest.approx(delta, rel=1e-6)
    assert gaussian.mu_for_epsilon(max(eps, 1e-3), delta) == pytest.approx(mu, rel=1e-4) or eps == 0


def test_analytic_gaussian_beats_classical_calibration():
    # Classical Gaussian mechanism: sigma = sqrt(2 ln(1.25/delta)) / eps, valid for eps < 1.
    eps, delta = 0.5, 1e-5
    classical = math.sqrt(2 * math.log(1.25 / delta)) / eps
    exact = 1 / gaussian.mu_for_epsilon(eps, delta)
    assert exact < classical
    assert gaussian.epsilon_for_delta(1 / classical, delta) < eps


@pytest.mark.parametrize("sigma", [0.8, 2.0, 10.0])
def test_matches_dp_accounting_pld_of_the_gaussian_mechanism(sigma):
    delta = 1e-6
    pld = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-5)
    pld.compose(dp_accounting.GaussianDpEvent(sigma))
    exact = gaussian.epsilon_for_delta(1 / sigma, delta)
    # PLD is pessimistic and discretised: never below the exact value, close above it.
    assert exact <= pld.get_epsilon(delta) + 1e-9
    assert pld.get_epsilon(delta) == pytest.approx(exact, abs=2e-3)


def test_tiny_mu_spends_nothing():
    assert gaussian.epsilon_for_delta(1e-6, 1e-5) == 0.0
