"""Save figures as PNG (to look at) and PDF (for papers), with a fixed, headless backend."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from dpvip.privacy.randomness import NOT_PRIVATE  # noqa: E402
from dpvip.report.common.seeded import seeded_runs  # noqa: E402

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


def runs_with_spread(axis, xs, means, stds, color=None, label=None, **style) -> None:
    """A line of means with their std over runs as error bars. A point of a single run (std
    NaN) gets no bar and is drawn hollow: a zero-length bar would read as a measured spread.
    The legend says so when any point is a single run."""
    xs, means, stds = list(xs), list(means), [float(s) for s in stds]
    single = [s != s for s in stds]
    if any(single) and label:
        label = f"{label}; hollow: one run"
    line = axis.errorbar(
        xs,
        means,
        yerr=[0.0 if lone else s for s, lone in zip(stds, single)],
        errorevery=[not lone for lone in single],
        color=color,
        label=label,
        **style,
    )
    if any(single):
        lone = [(x, m) for x, m, is_lone in zip(xs, means, single) if is_lone]
        edge = line.lines[0].get_color()
        axis.scatter(*zip(*lone), s=60, facecolors="white", edgecolors=edge, linewidths=2, zorder=3)
