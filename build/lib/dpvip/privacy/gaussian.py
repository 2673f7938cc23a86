"""Exact privacy of (compositions of) Gaussian mechanisms without subsampling.

A Gaussian mechanism with sensitivity 1 and noise multiplier sigma is mu-GDP with
mu = 1/sigma, and mu-GDP mechanisms compose exactly: mu_total = sqrt(sum mu_i^2)
(Dong, Roth & Su 2019). The (epsilon, delta) curve of mu-GDP is the analytic Gaussian
one (Balle & Wang 2018), so full-batch runs (q = 1) need no accountant approximation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from scipy.special import log_ndtr, ndtr

# Beyond these the (epsilon, delta) curve is numerically flat; searches stop there.
_MAX_EPSILON = 1e4
_MIN_MU, _MAX_MU = 1e-8, 1e4


def composed_mu(sigmas_and_steps: Iterable[tuple[float, int]]) -> float:
    """GDP parameter of composing `steps` Gaussian mechanisms per (sigma, steps) pair."""
    return math.sqrt(sum(steps / sigma**2 for sigma, steps in sigmas_and_steps))


def composed_sigma(sigmas_and_steps: Iterable[tuple[float, int]]) -> float:
    """Noise multiplier of the single Gaussian mechanism equivalent to the composition.

    For one mean with sigma_1 and T steps with sigma_2 this is
    1 / sqrt(1/sigma_1^2 + T/sigma_2^2) (DP-RandP, Table 23).
    """
    return 1.0 / composed_mu(sigmas_and_steps)


def delta_for_epsilon(mu: float, eps: float) -> float:
    """delta(eps) of a mu-GDP mechanism (tight), computed in log space for stability."""
    first = ndtr(-eps / mu + mu / 2)
    second = math.exp(eps + log_ndtr(-eps / mu - mu / 2))
    return max(0.0, float(first - second))


def epsilon_for_delta(mu: float, delta: float) -> float:
    """Smallest epsilon with delta(epsilon) <= delta for a mu-GDP mechanism."""
    if delta_for_epsilon(mu, 0.0) <= delta:
        return 0.0
    if delta_for_epsilon(mu, _MAX_EPSILON) > delta:
        return math.inf
    from scipy.optimize import brentq  # 0.4 s: only where a root is found

    return float(brentq(lambda e: delta_for_epsilon(mu, e) - delta, 0.0, _MAX_EPSILON, xtol=1e-12))


def mu_for_epsilon(eps: float, delta: float) -> float:
    """Largest mu whose mechanism is (eps, delta)-DP (delta grows with mu)."""
    from scipy.optimize import brentq

    return float(brentq(lambda m: delta_for_epsilon(m, eps) - delta, _MIN_MU, _MAX_MU, xtol=1e-14))
