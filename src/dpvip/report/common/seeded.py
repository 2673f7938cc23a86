"""What a table or figure says when a DP run behind it was seeded, found in the runs' own
ledgers rather than assumed from the config: its noise is reproducible from the published seed,
so it is not private, and every table and figure built from it says so."""

from __future__ import annotations

from collections.abc import Iterable

from dpvip.privacy.ledger import ledgers
from dpvip.privacy.randomness import NOT_PRIVATE


def seeded_runs(results: Iterable) -> int:
    """How many ledgers in `results` record seeded (not private) randomness."""
    return sum(1 for ledger in ledgers(list(results)) if ledger["randomness"] == "seeded")


def randomness_notes(results: Iterable) -> list[str]:
    """The note a table carries when any run behind it was seeded (none otherwise)."""
    count = seeded_runs(results)
    if not count:
        return []
    return [f"{NOT_PRIVATE} ({count} DP run(s) behind this table): a test or reproduction, not a release"]
