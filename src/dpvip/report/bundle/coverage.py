"""The numbered tables and figures of ViP, Mehta et al. and DP-RandP, each mapped to our
output stems or to the reason it has none: the data `dpvip.report.claims.coverage` tabulates.

One `Item` per numbered table or figure (`dpvip.report.claims.coverage_item`; a figure's
labelled panels are items of their own where the paper labels them, as Mehta et al.'s 1a and
1b, or where we draw them apart, as ViP's 4a and 4b), listed per paper in each paper's
package (`vip.coverage`, `mehta.coverage`, `dprandp.coverage`). A wrong entry stops at import.
"""

from __future__ import annotations

from dpvip.report.claims.coverage_item import Item
from dpvip.report.dprandp.coverage import RANDP_ITEMS
from dpvip.report.mehta.coverage import MEHTA_ITEMS
from dpvip.report.vip.coverage import VIP_ITEMS

ITEMS: tuple[Item, ...] = (*VIP_ITEMS, *MEHTA_ITEMS, *RANDP_ITEMS)
