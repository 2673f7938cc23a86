"""Epsilon as a function of the number of steps (ViP Figure 6)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from dp_accounting.pld import privacy_loss_distribution

from dpvip.privacy.accounting import PLD_DISCRETIZATION, Mechanism, check_delta_range, epsilon


def epsilon_curve(sample_rate: float, sigma: float, steps: Sequence[int], delta: float, accountant: str) -> list[float]:
    """Epsilon after each step count in `steps` (increasing) of one DP-SGD run.

    PLD builds the one-step loss distribution once and self-composes it per point;
    the other accountants are cheap enough to evaluate per point.
    """
    check_delta_range(delta)
    steps = [int(s) for s in steps]
    if any(b <= a for a, b in zip(steps, steps[1:])):
        raise ValueError("step counts must be strictly increasing")
    if accountant != "pld" or sample_rate == 1.0:
        return [epsilon([Mechanism(sample_rate, sigma, t)], delta, accountant).epsilon for t in steps]
    Mechanism(sample_rate, sigma, steps[0])  # validate once
    one_step = privacy_loss_distribution.from_gaussian_mechanism(
        sigma, sampling_prob=sample_rate, value_discretization_interval=PLD_DISCRETIZATION
    )
    return [float(one_step.self_compose(t).get_epsilon_for_delta(delta)) for t in steps]


def step_grid(total_steps: int, points: int) -> list[int]:
    """About `points` step counts from 1 to `total_steps`: half log-spaced (the steep start),
    half evenly spaced (the long tail)."""
    half = max(points // 2, 2)
    spaced = np.concatenate([np.geomspace(1, total_steps, num=half), np.linspace(1, total_steps, num=half)])
    grid = np.unique(spaced.round().astype(int))
    return [int(s) for s in grid]
