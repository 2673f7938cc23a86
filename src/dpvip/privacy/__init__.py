"""Differential privacy: the DP training engine and privacy accounting.

Modules: `step` (the one DP step), `clipping` (per-example clipped gradient sums), `noise`
(privatising them), `sampling` (Poisson), `randomness` (a run's secret, or its published
seed), `ledger` (budget and spent epsilon of a run), `optimizers`, `accounting` (epsilon,
noise calibration, three accountants), `gaussian` (exact full-batch composition), `claims`
and `audit` (the papers' settings), `curves`.
"""

from dpvip.errors import DpvipInputError

# Names offered by the command line and checked in configs without importing torch.
ACCOUNTANTS = ("rdp", "prv", "pld")
OPTIMIZERS = ("adamw", "adam", "sgd", "lamb")
# The DP mechanisms the empirical audit runs (`canaries`), as the config and command line name them.
AUDITED_MECHANISMS = ("dp_mae", "dp_finetune", "dprandp_phase3", "mehta_head", "dprandp_probe")
# Where a DP run's noise and batches come from (`randomness`): "seeded" is not private.
RANDOMNESS = ("secret", "seeded")
ROUNDING_SLACK = 0.005  # a claim printed as 8.0 still "holds" at 8.04 (relative)


def run_options(privacy: dict | None) -> dict:
    """What every DP run takes from the config's `privacy` section: where its randomness
    comes from, and whether a delta of at least 1/n is allowed."""
    privacy = privacy or {}
    return {
        "randomness": privacy.get("randomness", "secret"),
        "allow_large_delta": bool(privacy.get("allow_large_delta", False)),
    }


def check_randomness(mode: str) -> None:
    """Refuse a `privacy.randomness` that is neither 'secret' nor 'seeded'."""
    if mode not in RANDOMNESS:
        raise DpvipInputError(f"privacy.randomness '{mode}' is not one of {', '.join(RANDOMNESS)}")


def check_delta(delta: float, examples: int, allowed: bool) -> None:
    """Refuse delta >= 1/n (n training examples) unless `privacy.allow_large_delta`."""
    if delta * examples >= 1 and not allowed:
        raise DpvipInputError(
            f"delta {delta:g} is at least 1/n for this run's n = {examples} examples (delta * n = "
            f"{delta * examples:.3g}): a guarantee that weak allows publishing an example outright; "
            "lower delta, or set privacy.allow_large_delta: true to run it anyway (it stays flagged)"
        )
