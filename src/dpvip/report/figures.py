"""Save figures as PNG (to look at) and PDF (for papers), with a fixed, headless backend."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from dpvip.privacy.randomness import NOT_PRIVATE  # noqa: E402
from dpvip.report.privacy_notes import seeded_runs  # noqa: E402

FIGURE_SUFFIXES = (".png", ".pdf")


def save_figure(figure: plt.Figure, png_path: str | Path, runs: Iterable = ()) -> None:
    """Write `figure` to `<stem>.png` and `<stem>.pdf` beside `png_path`, then close it.
    `runs`: the results it is drawn from; if any DP run among them was seeded, its title
    says NOT PRIVATE.

    PDF metadata dates are dropped so the same figure gives the same bytes.
    """
    seeded = seeded_runs(runs)
    if seeded:
        title = figure._suptitle.get_text() if figure._suptitle else ""
        figure.suptitle(f"{NOT_PRIVATE} ({seeded} DP run(s))\n{title}".strip(), color="darkred")
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(png_path, dpi=150, bbox_inches="tight", metadata={"Software": None})
    figure.savefig(
        png_path.with_suffix(".pdf"),
        bbox_inches="tight",
        metadata={"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
    )
    plt.close(figure)
