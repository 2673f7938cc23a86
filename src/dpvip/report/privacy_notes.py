"""What a table says of the privacy of the runs behind it, found in the runs' own ledgers
rather than assumed from the config: a run whose randomness was seeded is not private (its
noise is reproducible from the published seed), and every table built from one says so; and
the total epsilon of its DP releases on each private dataset (`privacy_totals`)."""

from __future__ import annotations

from collections.abc import Iterable

from dpvip.privacy.ledger import ledgers
from dpvip.privacy.randomness import NOT_PRIVATE
from dpvip.report.privacy_totals import total_notes


def seeded_runs(results: Iterable) -> int:
    """How many ledgers in `results` record seeded (not private) randomness."""
    return sum(1 for ledger in ledgers(list(results)) if ledger["randomness"] == "seeded")


def randomness_notes(results: Iterable) -> list[str]:
    """The note a table carries when any run behind it was seeded (none otherwise)."""
    count = seeded_runs(results)
    if not count:
        return []
    return [f"{NOT_PRIVATE} ({count} DP run(s) behind this table): a test or reproduction, not a release"]


def privacy_notes(results: Iterable) -> list[str]:
    """A table's privacy notes: the seeded runs' (`randomness_notes`), then the total epsilon
    of its releases on each private dataset."""
    results = list(results)
    return randomness_notes(results) + total_notes(results)
