"""What a table says of the privacy of the runs behind it, found in the runs' own ledgers
rather than assumed from the config: the seeded runs' note (`dpvip.report.common.seeded`), and
the total epsilon of its DP releases on each private dataset (`dpvip.report.privacy.totals`)."""

from __future__ import annotations

from collections.abc import Iterable

from dpvip.report.common.seeded import randomness_notes
from dpvip.report.privacy.totals import total_notes


def privacy_notes(results: Iterable) -> list[str]:
    """A table's privacy notes: the seeded runs' (`randomness_notes`), then the total epsilon
    of its releases on each private dataset."""
    results = list(results)
    return randomness_notes(results) + total_notes(results)
