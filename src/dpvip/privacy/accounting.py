"""Epsilon of DP-SGD-style mechanisms and noise calibration, with three accountants.

- ``rdp``: opacus' Renyi-DP accountant (what ViP and Mehta et al. used), with orders
  extended beyond opacus' defaults so the bound is not limited by the order grid;
- ``prv``: opacus' PRV accountant (Gopi et al. 2021; what DP-RandP used), eps_error 0.01;
- ``pld``: dp-accounting's privacy-loss-distribution accountant.

A composition of full-batch steps only (q = 1 everywhere) is an exact Gaussian
mechanism: ``prv`` and ``pld`` then return the exact analytic-Gaussian answer instead of
a numerical approximation of it. ``rdp`` stays the RDP bound, since that is the number
a paper that used RDP accounting obtained.

opacus, dp-accounting and scipy are imported where a number is computed: the answers are
memoised on disk, and checking input or reading the memo should not cost a job the 2-3 s
of importing them.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from dpvip.errors import DpvipInputError
from dpvip.privacy import ACCOUNTANTS, gaussian
from dpvip.memo import memoised

PRV_EPS_ERROR = 0.01
# PLD loss discretisation. Coarser than dp-accounting's 1e-4 default but still pessimistic
# (an upper bound): on ViP's settings epsilon is within 0.005 of the 1e-4 value, 10x faster.
PLD_DISCRETIZATION = 1e-3
# Epsilon resolution of the numerical accountants: calibrating to a target within ten times
# this would return a sigma fitted to accountant error, not to the mechanism.
RESOLUTION = {"prv": PRV_EPS_ERROR, "pld": PLD_DISCRETIZATION}
CALIBRATION_TOLERANCE = 0.01  # calibrated sigma spends at most this much less epsilon
CALIBRATION_RTOL = 1e-3  # relative precision of sigma from root finding (papers print 2-3 digits)
EXTRA_RDP_ORDERS = (64, 80, 96, 128, 192, 256, 512, 1024)  # beyond opacus' default grid
# The accountants' answers are kept across jobs (dpvip.memo), keyed by this code and these libraries.
accounting_memo = memoised(
    "accounting", ("privacy/accounting.py", "privacy/gaussian.py"), ("opacus", "dp-accounting", "scipy", "numpy")
)
METHODS = {
    "rdp": "opacus-rdp",
    "prv": "opacus-prv",
    "pld": "dp_accounting-pld",
    "exact": "analytic-gaussian-gdp",
}


@dataclass(frozen=True)
class Mechanism:
    """`steps` rounds of the Poisson-subsampled Gaussian mechanism (sensitivity 1)."""

    sample_rate: float
    noise_multiplier: float
    steps: int

    def __post_init__(self) -> None:
        check_sample_rate(self.sample_rate)
        check_steps(self.steps)
        if not (self.noise_multiplier > 0 and math.isfinite(self.noise_multiplier)):
            raise DpvipInputError(f"noise multiplier {self.noise_multiplier} must be a positive finite number")

    @property
    def full_batch(self) -> bool:
        return self.sample_rate == 1.0


@dataclass(frozen=True)
class Spent:
    """The privacy of a composition under one accountant."""

    epsilon: float
    delta: float
    accountant: str
    method: str


@dataclass(frozen=True)
class Calibration:
    """The smallest noise multiplier (within tolerance) meeting a budget."""

    noise_multiplier: float
    epsilon: float
    target_epsilon: float
    delta: float
    accountant: str
    method: str


def check_sample_rate(sample_rate: float) -> None:
    if not 0.0 < sample_rate <= 1.0:
        raise DpvipInputError(f"sample rate {sample_rate} is outside (0, 1]")


def check_steps(steps: int) -> None:
    if int(steps) != steps or steps < 1:
        raise DpvipInputError(f"steps {steps} must be a positive integer")


def check_delta_range(delta: float) -> None:
    if not 0.0 < delta < 1.0:
        raise DpvipInputError(f"delta {delta} is outside (0, 1)")


def check_accountant(accountant: str) -> None:
    if accountant not in ACCOUNTANTS:
        raise DpvipInputError(f"accountant '{accountant}' is not one of {', '.join(ACCOUNTANTS)}")


def _method(accountant: str, full_batch: bool) -> str:
    """The computation behind an accountant: exact Gaussian DP for full-batch prv/pld."""
    return "exact" if accountant != "rdp" and full_batch else accountant


def rdp_orders() -> list[float]:
    from opacus.accountants import RDPAccountant

    return [*RDPAccountant.DEFAULT_ALPHAS, *EXTRA_RDP_ORDERS]


def _rdp_epsilon(mechanisms: Sequence[Mechanism], delta: float) -> float:
    from opacus.accountants import RDPAccountant

    accountant = RDPAccountant()
    accountant.history = [(m.noise_multiplier, m.sample_rate, m.steps) for m in mechanisms]
    return accountant.get_epsilon(delta, alphas=rdp_orders())


def _prv_epsilon(mechanisms: Sequence[Mechanism], delta: float) -> float:
    from opacus.accountants import PRVAccountant

    accountant = PRVAccountant()
    accountant.history = [(m.noise_multiplier, m.sample_rate, m.steps) for m in mechanisms]
    return accountant.get_epsilon(delta, eps_error=PRV_EPS_ERROR)


def _pld_event(mechanism: Mechanism):
    import dp_accounting

    gaussian_event = dp_accounting.GaussianDpEvent(mechanism.noise_multiplier)
    if not mechanism.full_batch:
        gaussian_event = dp_accounting.PoissonSampledDpEvent(mechanism.sample_rate, gaussian_event)
    return dp_accounting.SelfComposedDpEvent(gaussian_event, mechanism.steps)


def _pld_epsilon(mechanisms: Sequence[Mechanism], delta: float) -> float:
    import dp_accounting

    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
    accountant.compose(dp_accounting.ComposedDpEvent([_pld_event(m) for m in mechanisms]))
    return accountant.get_epsilon(delta)


def _exact_epsilon(mechanisms: Sequence[Mechanism], delta: float) -> float:
    mu = gaussian.composed_mu((m.noise_multiplier, m.steps) for m in mechanisms)
    return gaussian.epsilon_for_delta(mu, delta)


_EPSILON = {"rdp": _rdp_epsilon, "prv": _prv_epsilon, "pld": _pld_epsilon, "exact": _exact_epsilon}


@accounting_memo
def _composed_epsilon(method: str, mechanisms: tuple[Mechanism, ...], delta: float) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # opacus' order-grid hint; grid extended
        return float(_EPSILON[method](mechanisms, delta))


def epsilon(mechanisms: Sequence[Mechanism], delta: float, accountant: str) -> Spent:
    """Epsilon at `delta` of composing `mechanisms`, under `accountant`."""
    check_delta_range(delta)
    check_accountant(accountant)
    if not mechanisms:
        raise DpvipInputError("no mechanism given to account for")
    method = _method(accountant, all(m.full_batch for m in mechanisms))
    try:
        value = _composed_epsilon(method, tuple(mechanisms), float(delta))
    except (ValueError, RuntimeError, OverflowError) as err:
        raise DpvipInputError(f"{accountant} accountant cannot evaluate this setting: {err}") from err
    return Spent(float(value), delta, accountant, METHODS[method])


MAX_NOISE_MULTIPLIER = 1e6  # opacus' search limit; the same bound for every accountant


def _unreachable(target_epsilon: float, delta: float, accountant: str) -> DpvipInputError:
    return DpvipInputError(
        f"epsilon {target_epsilon} at delta {delta} cannot be reached under {accountant} "
        f"by any noise multiplier up to {MAX_NOISE_MULTIPLIER:g}"
    )


def _calibrate_exact(sample_rate: float, steps: int, target_epsilon: float, delta: float) -> float:
    try:
        mu = gaussian.mu_for_epsilon(target_epsilon, delta)
    except ValueError as err:
        raise _unreachable(target_epsilon, delta, "exact Gaussian accounting") from err
    return math.sqrt(steps) / mu


def _calibrate_rdp(sample_rate: float, steps: int, target_epsilon: float, delta: float) -> float:
    from opacus.accountants.utils import get_noise_multiplier

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return get_noise_multiplier(
                target_epsilon=target_epsilon,
                target_delta=delta,
                sample_rate=sample_rate,
                steps=steps,
                accountant="rdp",
                epsilon_tolerance=CALIBRATION_TOLERANCE,
                alphas=rdp_orders(),
            )
    except ValueError as err:
        raise _unreachable(target_epsilon, delta, "rdp") from err


def _single_epsilon(sample_rate: float, sigma: float, steps: int, delta: float, accountant: str) -> float:
    """Epsilon of one mechanism (memoised below, in `_composed_epsilon`: calibration's last probe is the
    reported epsilon)."""
    return epsilon([Mechanism(sample_rate, sigma, steps)], delta, accountant).epsilon


def _calibrate_numeric(accountant: str):
    """Root-find sigma for prv/pld inside a bracket from the RDP calibration: RDP bounds
    the true epsilon from above, so its sigma is (nearly) enough and a tight start."""

    def calibrate(sample_rate: float, steps: int, target_epsilon: float, delta: float) -> float:
        from scipy.optimize import brentq

        def gap(sigma: float) -> float:
            return _single_epsilon(sample_rate, sigma, steps, delta, accountant) - target_epsilon

        try:
            high = _calibrate_rdp(sample_rate, steps, target_epsilon, delta)
        except DpvipInputError:  # RDP's order grid can fail where prv/pld still succeed
            high = 1.0
        while gap(high) > 0:
            if high > MAX_NOISE_MULTIPLIER:
                raise _unreachable(target_epsilon, delta, accountant)
            high *= 1.25 if high > 1.0 else 2.0
        low = high * 0.9  # accountants differ by percents; small steps avoid costly low-sigma evaluations
        while gap(low) <= 0:
            low, high = low * 0.9, low
        sigma = brentq(gap, low, high, rtol=CALIBRATION_RTOL)
        while gap(sigma) > 0:  # keep the guarantee: never return a sigma that overspends
            sigma *= 1 + 1e-4
        return sigma

    return calibrate


_CALIBRATE = {
    "rdp": _calibrate_rdp,
    "prv": _calibrate_numeric("prv"),
    "pld": _calibrate_numeric("pld"),
    "exact": _calibrate_exact,
}


@accounting_memo  # a study trains many heads with one mechanism; many runs share a budget
def noise_multiplier(
    sample_rate: float, steps: int, target_epsilon: float, delta: float, accountant: str
) -> Calibration:
    """Noise multiplier for `steps` Poisson-sampled steps at `sample_rate` to spend at most
    `target_epsilon` at `delta`; the returned epsilon is the one actually spent."""
    check_sample_rate(sample_rate)
    check_steps(steps)
    check_delta_range(delta)
    check_accountant(accountant)
    if not (target_epsilon > 0 and math.isfinite(target_epsilon)):
        raise DpvipInputError(f"target epsilon {target_epsilon} must be a positive finite number")
    method = _method(accountant, sample_rate == 1.0)
    resolution = RESOLUTION.get(method, 0.0)
    if target_epsilon < 10 * resolution:
        raise DpvipInputError(
            f"epsilon {target_epsilon} is below what the {accountant} accountant resolves "
            f"(about {resolution:g}); use a larger epsilon or another accountant"
        )
    sigma = float(_CALIBRATE[method](sample_rate, steps, target_epsilon, delta))
    spent = _single_epsilon(sample_rate, sigma, steps, delta, accountant)
    return Calibration(sigma, spent, target_epsilon, delta, accountant, METHODS[method])
