"""Privacy accounting: epsilon of DP-SGD-style mechanisms and noise calibration.

Modules: `accounting` (epsilon, noise calibration, three accountants), `gaussian` (exact
full-batch composition), `claims` and `audit` (the papers' settings), `curves`.
"""

# The accountant names, here so the command line can offer them without importing torch.
ACCOUNTANTS = ("rdp", "prv", "pld")
