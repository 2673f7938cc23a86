"""Privacy accounting: epsilon of DP-SGD-style mechanisms and noise calibration.

Modules: `accounting` (epsilon, noise calibration, three accountants), `gaussian` (exact
full-batch composition), `claims` and `audit` (the papers' settings), `curves`.
"""
