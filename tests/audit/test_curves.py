import pytest

from dpvip.privacy.accounting import Mechanism, epsilon
from dpvip.audit.curves import epsilon_curve, step_grid


def test_step_grid_spans_the_run():
    grid = step_grid(6100, 40)
    assert grid[0] == 1 and grid[-1] == 6100
    assert grid == sorted(set(grid)) and 20 <= len(grid) <= 40


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_curve_increases_and_ends_at_the_run_epsilon(accountant):
    q, sigma, delta = 0.01, 1.0, 1e-6
    grid = step_grid(500, 10)
    curve = epsilon_curve(q, sigma, grid, delta, accountant)
    assert all(b > a for a, b in zip(curve, curve[1:]))
    assert curve[-1] == pytest.approx(epsilon([Mechanism(q, sigma, 500)], delta, accountant).epsilon, rel=1e-6)


def test_steps_must_increase():
    with pytest.raises(ValueError, match="increasing"):
        epsilon_curve(0.01, 1.0, [5, 3], 1e-5, "rdp")
