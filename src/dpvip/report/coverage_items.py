"""The numbered tables and figures of ViP, Mehta et al. and DP-RandP, each mapped to our
output stems or to the reason it has none: the data `dpvip.report.coverage` tabulates.

One `Item` per numbered table or figure (`coverage_item`; a figure's labelled panels are items
of their own where the paper labels them, as Mehta et al.'s 1a and 1b, or where we draw them
apart, as ViP's 4a and 4b), listed per paper in `coverage_vip`, `coverage_mehta` and
`coverage_dprandp`. A wrong entry stops at import.
"""

from __future__ import annotations

from dpvip.report.coverage_dprandp import RANDP_ITEMS
from dpvip.report.coverage_item import (  # noqa: F401 (re-exported: the coverage data's vocabulary)
    CAPTION_LENGTH,
    FIGURE_STEMS,
    KINDS,
    PAPERS,
    STATUSES,
    TITLE,
    UNNUMBERED,
    Item,
)
from dpvip.report.coverage_mehta import MEHTA_ITEMS
from dpvip.report.coverage_vip import VIP_ITEMS

ITEMS: tuple[Item, ...] = (*VIP_ITEMS, *MEHTA_ITEMS, *RANDP_ITEMS)
