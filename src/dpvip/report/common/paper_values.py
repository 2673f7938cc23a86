"""Numbers printed in the papers' tables: `config/paper_values/<paper>.csv`.

One row per printed number: paper, table, row, column, value, unit. Tables that
reproduce a paper's result read the paper's side from here.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dpvip.errors import DpvipInputError

COLUMNS = ["paper", "table", "row", "column", "value", "unit"]
KEY = ["paper", "table", "row", "column"]


def load_paper_values(folder: str | Path) -> pd.DataFrame:
    """All papers' values, checked: the six columns, numeric values, unique keys."""
    folder = Path(folder)
    files = sorted(folder.glob("*.csv"))
    if not files:
        raise DpvipInputError(f"no paper-value CSV files in {folder}")
    frames = []
    for path in files:
        frame = pd.read_csv(path, dtype={"value": str})
        if list(frame.columns) != COLUMNS:
            raise DpvipInputError(f"{path}: columns must be {','.join(COLUMNS)}")
        numbers = pd.to_numeric(frame["value"], errors="coerce")
        bad = frame.loc[numbers.isna(), "value"]
        if not bad.empty:
            raise DpvipInputError(f"{path}: value {bad.iloc[0]!r} (line {bad.index[0] + 2}) is not a number")
        frames.append(frame.assign(value=numbers))
    values = pd.concat(frames, ignore_index=True)
    duplicated = values[values.duplicated(KEY, keep=False)]
    if not duplicated.empty:
        first = duplicated.iloc[0]
        raise DpvipInputError(f"paper value {tuple(first[KEY])} is given more than once")
    return values


def paper_table(values: pd.DataFrame, paper: str, table: str) -> pd.DataFrame:
    """One printed table as rows x columns, in the order the CSV lists them."""
    subset = values[(values["paper"] == paper) & (values["table"] == table)]
    if subset.empty:
        raise DpvipInputError(f"no paper values for {paper} {table}")
    wide = subset.pivot(index="row", columns="column", values="value")
    return wide.reindex(index=subset["row"].unique(), columns=subset["column"].unique())
