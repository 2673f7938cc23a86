import math
import re

import numpy as np
import pytest

from dpvip.errors import DpvipInputError
from dpvip.privacy.accounting import ACCOUNTANTS, Mechanism, epsilon, noise_multiplier

VIP_N = 233_000_000
VIP_MAIN = Mechanism(98304 / VIP_N, 0.48, 6100)
VIP_DELTA = 1 / (2 * VIP_N)


def test_vip_main_run_is_epsilon_8_under_rdp():
    # ViP Sec. 4.1: q = 98304/n, sigma = 0.48, T = 6100, delta = 1/(2n), opacus RDP -> epsilon 8.
    assert epsilon([VIP_MAIN], VIP_DELTA, "rdp").epsilon == pytest.approx(8.0, abs=0.05)


def test_tighter_accountants_agree_and_beat_rdp_on_vip():
    spent = {name: epsilon([VIP_MAIN], VIP_DELTA, name).epsilon for name in ACCOUNTANTS}
    assert spent["prv"] == pytest.approx(spent["pld"], abs=0.05)
    assert spent["pld"] < spent["rdp"] - 0.5


# DP-RandP Table 13 (CIFAR10, n = 50,000, batch 4096, delta 1e-5): sigma from PRV, rounded up.
DPRANDP_CIFAR10 = [(1, 9.3, 875), (2, 5.6, 1125), (3, 4.7, 1593), (4, 3.8, 1687), (6, 2.9, 1843), (8, 2.6, 2468)]


@pytest.mark.parametrize("claimed, sigma, steps", DPRANDP_CIFAR10)
def test_dprandp_cifar10_sigmas_reach_their_epsilons_under_prv(claimed, sigma, steps):
    spent = epsilon([Mechanism(4096 / 50000, sigma, steps)], 1e-5, "prv").epsilon
    assert spent <= claimed
    # Rounding sigma up to 0.1 costs little: the budget is nearly used.
    assert spent > 0.9 * claimed


def _rdp_full_batch_reference(sigma: float, steps: int, delta: float) -> float:
    """RDP of the Gaussian mechanism, alpha * T / (2 sigma^2), with the Balle et al. 2020 conversion."""
    orders = np.concatenate([np.linspace(1.01, 12, 2000), np.arange(12, 1025)])
    rdp = orders * steps / (2 * sigma**2)
    eps = rdp + np.log1p(-1 / orders) - (np.log(delta) + np.log(orders)) / (orders - 1)
    return float(eps.min())


@pytest.mark.parametrize("sigma, steps", [(1.0, 1), (4.0, 10), (20.0, 100)])
def test_rdp_full_batch_matches_closed_form(sigma, steps):
    ours = epsilon([Mechanism(1.0, sigma, steps)], 1e-6, "rdp").epsilon
    assert ours == pytest.approx(_rdp_full_batch_reference(sigma, steps, 1e-6), rel=0.01)


@pytest.mark.parametrize("accountant", ["prv", "pld"])
def test_full_batch_is_exact_gaussian(accountant):
    spent = epsilon([Mechanism(1.0, 38.0, 100)], 1e-5, accountant)
    assert spent.method == "analytic-gaussian-gdp"
    # 100 steps at sigma 38 = one step at sigma 3.8.
    assert spent.epsilon == pytest.approx(epsilon([Mechanism(1.0, 3.8, 1)], 1e-5, accountant).epsilon)


def test_rdp_stays_rdp_at_full_batch_and_is_looser():
    rdp = epsilon([Mechanism(1.0, 3.8, 1)], 1e-5, "rdp")
    exact = epsilon([Mechanism(1.0, 3.8, 1)], 1e-5, "pld")
    assert rdp.method == "opacus-rdp" and rdp.epsilon > exact.epsilon


@pytest.mark.parametrize("accountant", ACCOUNTANTS)
def test_composition_of_different_mechanisms_is_at_least_each_part(accountant):
    first, second = Mechanism(0.01, 1.0, 100), Mechanism(0.02, 2.0, 50)
    both = epsilon([first, second], 1e-5, accountant).epsilon
    assert both > epsilon([first], 1e-5, accountant).epsilon
    assert both > epsilon([second], 1e-5, accountant).epsilon


@pytest.mark.parametrize("accountant", ACCOUNTANTS)
@pytest.mark.parametrize("sample_rate, steps, target", [(0.01, 500, 2.0), (4096 / 50000, 875, 1.0), (1.0, 1, 4.0)])
def test_sigma_calibration_round_trip(accountant, sample_rate, steps, target):
    found = noise_multiplier(sample_rate, steps, target, 1e-5, accountant)
    spent = epsilon([Mechanism(sample_rate, found.noise_multiplier, steps)], 1e-5, accountant).epsilon
    assert spent == pytest.approx(found.epsilon)
    assert target - 0.05 <= spent <= target
    # A little less noise overspends: the sigma is (close to) the smallest that works.
    less = epsilon([Mechanism(sample_rate, found.noise_multiplier * 0.97, steps)], 1e-5, accountant).epsilon
    assert less > target


@pytest.mark.slow
def test_tighter_accounting_needs_less_noise():
    sigmas = {a: noise_multiplier(0.01, 1000, 3.0, 1e-5, a).noise_multiplier for a in ACCOUNTANTS}
    assert sigmas["pld"] < sigmas["rdp"] and sigmas["prv"] < sigmas["rdp"]
    assert sigmas["pld"] == pytest.approx(sigmas["prv"], rel=0.01)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: Mechanism(1.5, 1.0, 10), "sample rate 1.5 is outside (0, 1]"),
        (lambda: Mechanism(0.0, 1.0, 10), "sample rate 0.0 is outside (0, 1]"),
        (lambda: Mechanism(0.1, 0.0, 10), "noise multiplier 0.0 must be a positive"),
        (lambda: Mechanism(0.1, -1.0, 10), "noise multiplier -1.0 must be a positive"),
        (lambda: Mechanism(0.1, 1.0, 0), "steps 0 must be a positive integer"),
        (lambda: epsilon([Mechanism(0.1, 1.0, 10)], 1.0, "rdp"), "delta 1.0 is outside (0, 1)"),
        (lambda: epsilon([Mechanism(0.1, 1.0, 10)], 1e-5, "gdp"), "accountant 'gdp' is not one of"),
        (lambda: noise_multiplier(0.1, 10, 0.0, 1e-5, "rdp"), "target epsilon 0.0 must be a positive finite number"),
        (lambda: noise_multiplier(0.1, 10, -1.0, 1e-5, "rdp"), "target epsilon -1.0 must be a positive finite number"),
        (lambda: noise_multiplier(0.1, 10, math.inf, 1e-5, "pld"), "target epsilon inf must be a positive finite"),
        (lambda: noise_multiplier(0.1, 10, math.nan, 1e-5, "pld"), "target epsilon nan must be a positive finite"),
    ],
)
def test_bad_input_is_named(call, message):
    with pytest.raises(DpvipInputError, match=re.escape(message)):
        call()


@pytest.mark.parametrize("accountant, target", [("prv", 0.05), ("pld", 0.005)])
def test_targets_below_accountant_resolution_are_refused(accountant, target):
    with pytest.raises(DpvipInputError, match=f"below what the {accountant} accountant resolves"):
        noise_multiplier(0.5, 10, target, 1e-10, accountant)


def test_small_full_batch_targets_stay_exact():
    # q = 1 under prv is exact Gaussian accounting: no resolution limit.
    found = noise_multiplier(1.0, 100, 0.05, 1e-5, "prv")
    assert found.method == "analytic-gaussian-gdp" and found.epsilon == pytest.approx(0.05, rel=1e-6)


def test_input_checks_and_memo_hits_do_not_import_the_accountants(tmp_path):
    """opacus, dp-accounting and scipy.optimize cost a job 2-3 s: a bad input, or an answer
    already in the memo, is given without them (a miss loads them: the check can fail)."""
    import json
    import os
    import subprocess
    import sys

    code = """
import json, sys
from dpvip.errors import DpvipInputError
from dpvip.privacy.accounting import Mechanism, epsilon
try:
    epsilon([Mechanism(0.01, 1.0, 10)], 1.5, "prv")
except DpvipInputError:
    pass
loaded = lambda: sorted(m for m in ("opacus", "dp_accounting", "scipy.optimize") if m in sys.modules)
before = loaded()
spent = epsilon([Mechanism(0.01, 1.0, 10)], 1e-5, "rdp").epsilon
print(json.dumps({"before": before, "after": loaded(), "epsilon": spent}))
"""
    env = os.environ | {"DPVIP_MEMO": str(tmp_path)}
    runs = [
        json.loads(
            subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        )
        for _ in range(2)
    ]
    assert runs[0]["before"] == [] and "opacus" in runs[0]["after"]  # a miss computes with opacus
    assert runs[1]["before"] == runs[1]["after"] == []  # the second process reads the memo
    assert runs[1]["epsilon"] == runs[0]["epsilon"]
