"""Privacy accounting: epsilon of DP-SGD-style mechanisms and noise calibration."""

from dpvip.privacy.accounting import (
    ACCOUNTANTS,
    Mechanism,
    epsilon,
    noise_multiplier,
)
from dpvip.privacy.gaussian import composed_sigma

__all__ = ["ACCOUNTANTS", "Mechanism", "composed_sigma", "epsilon", "noise_multiplier"]
