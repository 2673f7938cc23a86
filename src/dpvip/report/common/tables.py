"""Write one table as CSV (data), Markdown and LaTeX (for reading), side by side."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from dpvip.privacy.randomness import NOT_PRIVATE

TABLE_SUFFIXES = (".csv", ".md", ".tex")
NOT_PRIVATE_MARK = NOT_PRIVATE.split(":")[0]  # "NOT PRIVATE"


def _formatted(frame: pd.DataFrame, digits: int) -> pd.DataFrame:
    def fmt(value):
        if isinstance(value, float):
            if math.isnan(value):
                return ""  # a cell with no value (e.g. not reproduced)
            if value.is_integer() and abs(value) < 1e15:
                return str(int(value))  # counts such as 98304 keep every digit
            return f"{value:.{digits}g}"
        return value

    return frame.map(fmt)


def write_table(frame: pd.DataFrame, csv_path: str | Path, title: str, notes: list[str], digits: int = 4) -> None:
    """Write `frame` to `<stem>.csv`, `<stem>.md` and `<stem>.tex` beside `csv_path`.

    The CSV keeps full precision; the readable forms round to `digits` significant
    digits and carry the title and notes (scale, stand-ins, assumptions).
    """
    csv_path = Path(csv_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    # Built on seeded (not private) runs: said in every form's body, not only in its notes
    # (a CSV has none, and a LaTeX note is a comment that no reader sees).
    warning = next((note for note in notes if note.startswith(NOT_PRIVATE_MARK)), None)
    if warning:
        frame = frame.assign(privacy=NOT_PRIVATE_MARK)
        title = f"{NOT_PRIVATE_MARK}: {title}"
    frame.to_csv(csv_path, index=False)
    readable = _formatted(frame, digits)
    notes_md = "\n".join(f"- {note}" for note in notes)
    banner = f"**{warning}**\n\n" if warning else ""
    csv_path.with_suffix(".md").write_text(f"# {title}\n\n{banner}{notes_md}\n\n{readable.to_markdown(index=False)}\n")
    latex = readable.to_latex(index=False, caption=title, escape=True, longtable=True)
    notes_tex = "".join(f"% {note}\n" for note in notes)
    csv_path.with_suffix(".tex").write_text(notes_tex + latex)
