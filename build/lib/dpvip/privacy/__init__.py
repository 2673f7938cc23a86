"""Differential privacy: the DP training engine and privacy accounting.

Modules: `clipping` (per-example clipped gradient sums), `noise` (privatising them),
`sampling` (Poisson), `ledger` (budget and spent epsilon of a run), `optimizers`,
`accounting` (epsilon, noise calibration, three accountants), `gaussian` (exact
full-batch composition), `claims` and `audit` (the papers' settings), `curves`.
"""

# Names offered by the command line and checked in configs without importing torch.
ACCOUNTANTS = ("rdp", "prv", "pld")
OPTIMIZERS = ("adamw", "adam", "sgd", "lamb")
ROUNDING_SLACK = 0.005  # a claim printed as 8.0 still "holds" at 8.04 (relative)
