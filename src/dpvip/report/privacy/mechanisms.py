"""The distinct DP mechanisms behind a set of results, read from their runs' ledgers under
common names (DP-SGD ledgers and the private probe's GDP record), each with how many runs had
it: what the privacy statement lists per output and what a grid's composition counts."""

from __future__ import annotations

import json

from dpvip.privacy.ledger import ledgers


def _mechanism(ledger: dict) -> dict:
    """One run's mechanism, under common names (DP-SGD ledgers and the probe's GDP record)."""
    examples = ledger.get("examples")
    delta = ledger.get("delta")
    return {
        "accountant": ledger.get("accountant"),
        "q": ledger.get("sample_rate", 1.0),
        "sigma": ledger.get("noise_multiplier", ledger.get("sigma_sgd")),
        "sigma_mean": ledger.get("sigma_mean"),
        "steps": ledger.get("steps_done", ledger.get("steps")),
        "clip_norm": ledger.get("clip_norm"),
        "delta": delta,
        "epsilon": ledger.get("epsilon_spent", ledger.get("epsilon")),
        "examples": examples,
        "delta_n": delta * examples if delta and examples else None,
        "randomness": ledger["randomness"],
    }


def mechanisms(records: list) -> list[dict]:
    """The distinct mechanisms of the runs in `records`, each with how many runs had it."""
    counted: dict[str, dict] = {}
    for ledger in ledgers(records):
        mechanism = _mechanism(ledger)
        key = json.dumps(mechanism, sort_keys=True)
        counted.setdefault(key, mechanism | {"runs": 0})["runs"] += 1
    return list(counted.values())
