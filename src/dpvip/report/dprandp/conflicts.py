"""Where DP-RandP prints two numbers for one quantity, so that every table or figure that
shows either number says so (we print each table's own number, as the paper does).

The numbers are read from config/paper_values/dprandp.csv, not written here: a conflict
whose places all print the same value (say, after a corrected CSV) makes no note.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from dpvip.plan.dprandp_rows import COLD_ROW, WARM_NO_PHASE2
from dpvip.report.common.paper_values import paper_table


@dataclass(frozen=True)
class Place:
    table: str  # 'table24'
    row: str
    column: str

    @property
    def name(self) -> str:
        return self.table.replace("table", "Table ")


@dataclass(frozen=True)
class Conflict:
    quantity: str
    places: tuple[Place, ...]
    reading: str  # which number looks right, and why (or that we cannot tell)
    decimals: int  # as the paper prints them (77.0, 82.90)

    def printed(self, value: float) -> str:
        return f"{value:.{self.decimals}f}"


CONFLICTS = (
    Conflict(
        "De et al. [15] (Phase III only, random initialisation) at ε = 6",
        (
            Place("table1", "De et al. [15]", "epsilon=6"),
            Place("table11", COLD_ROW, "epsilon=6"),
            Place("table24", COLD_ROW, "epsilon=6"),
        ),
        "77.0 fits its row (71.9 at ε = 4, 79.5 at ε = 8); 71.0 would fall below ε = 4's 71.9, "
        "so 71.0 is likely a typo",
        decimals=1,
    ),
    Conflict(
        "DP-RandP w/o Phase II (WRN-16-4, Wang and Isola's Phase I) at ε = 6",
        (
            Place("table6", "Accuracy(%)", "epsilon=6"),
            Place("table12", f"{WARM_NO_PHASE2} / WRN-16-4", "epsilon=6"),
            Place("table11", f"Wang and Isola [64] / {WARM_NO_PHASE2}", "epsilon=6"),
            Place("table24", WARM_NO_PHASE2, "epsilon=6"),
        ),
        "0.06 points apart, we cannot tell which is right",
        decimals=2,
    ),
)


def _value(values: pd.DataFrame, place: Place) -> float:
    printed = paper_table(values, "dprandp", place.table)
    return float(printed.at[place.row, place.column])


def _tables(places: list[Place]) -> str:
    """'Table 1', 'Tables 11 and 24', 'Tables 6, 11 and 24'."""
    numbers = [p.table.removeprefix("table") for p in places]
    if len(numbers) == 1:
        return f"Table {numbers[0]}"
    return f"Tables {', '.join(numbers[:-1])} and {numbers[-1]}"


def conflict_notes(values: pd.DataFrame, shown: set[tuple[str, str]]) -> list[str]:
    """One note per conflict that a table or figure showing the paper's rows `shown`
    ({(table, row)}, e.g. ('table1', 'De et al. [15]')) prints a number of: every number the
    paper gives, where, and which one is shown here."""
    notes = []
    for conflict in CONFLICTS:
        here = [p for p in conflict.places if (p.table, p.row) in shown]
        if not here:
            continue
        by_value: dict[float, list[Place]] = {}
        for place in conflict.places:
            by_value.setdefault(_value(values, place), []).append(place)
        if len(by_value) < 2 or any(math.isnan(v) for v in by_value):
            continue
        printed = " but ".join(f"{conflict.printed(v)} in {_tables(places)}" for v, places in by_value.items())
        shows = ", ".join(f"{conflict.printed(_value(values, p))} ({p.name})" for p in here)
        notes.append(
            f"Paper inconsistency: for {conflict.quantity} the paper prints {printed}; "
            f"shown here: {shows}. {conflict.reading[0].upper()}{conflict.reading[1:]}."
        )
    return notes
