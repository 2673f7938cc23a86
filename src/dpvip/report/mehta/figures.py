"""Mehta et al.'s Figures 1b and 2 from our runs. The paper prints no data for its figures;
of Figure 1b its text gives 81.7% for every epsilon in [4, 10] at delta 1e-6 (Abstract,
App. B; in config/paper_values/mehta.csv, drawn as the paper's line over that range), and
the earlier results the figure compares against (drawn as markers).

- figure1b: accuracy against epsilon of one full-batch DP-LAMB step of the last layer, one
  line per delta (1e-6, and 8e-7 as the paper's Figure 3), the non-private step dashed;
- figure2: (a) LAMB against momentum SGD without privacy, per learning rate, over the
  configured epochs at the largest batch (one step from zero weights has an accuracy that
  does not depend on the learning rate); (b) accuracy per input resolution and (c) per
  initialisation scale of the last layer, of one full-batch DP-LAMB step.
Every point is a mean over seeds with its std as an error bar (best learning rate of the
grid where a grid was run).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from dpvip.report.common.figures import runs_with_spread
from dpvip.report.mehta.notes import study_chances
from dpvip.report.common.paper_values import paper_table
from dpvip.report.common.transfer_cells import lr_curve, stand_in_label, study_cells

# Earlier ImageNet results Figure 1b's caption compares against: (label, epsilon, delta, top-1 %).
CITED = [
    ("Kurakin et al. (2022), 70 epochs", 10.0, 1e-6, 47.9),
    ("De et al. (2022)", 8.0, 8e-7, 81.1),
    ("De et al. (2022)", 1.0, 8e-7, 77.1),
]
PAPER_MODEL = "ViT-H/14-4B on ImageNet"  # Figure 1b's network and data


def _epsilon(column: str) -> float:
    return float(column.removeprefix("epsilon="))


def _paper_lines(axis, printed: pd.DataFrame) -> None:
    """The paper's own values, one line per delta over the epsilons its text gives."""
    for row, values in printed.iterrows():
        points = sorted((_epsilon(column), value) for column, value in values.dropna().items())
        span = f"epsilon {points[0][0]:g}-{points[-1][0]:g}" if len(points) > 1 else f"epsilon {points[0][0]:g}"
        axis.plot(
            [e for e, _ in points],
            [v for _, v in points],
            color="black",
            marker="s",
            linewidth=2,
            label=f"paper: {PAPER_MODEL}, {row.replace('=', ' ')} (printed for {span} only)",
        )


def _chance_lines(axis, results: dict, section: dict) -> None:
    """A dotted line at the chance level of the data our runs read: 10% on digits, where one of
    our curves can sit (momentum SGD at the largest batch) and must not read as learning."""
    imagenet = {"ImageNet-1k": section["mehta"]["datasets"]["ImageNet-1k"]}
    for chance in study_chances(results, section, imagenet).values():
        axis.axhline(chance.level, color="red", linestyle=":", linewidth=1, label=f"chance: {chance.data}")


def _stand_in(section: dict, scale: str) -> str:
    mehta = section["mehta"]
    return f"{scale} scale: {mehta['main']} on {mehta['datasets']['ImageNet-1k']} (paper: ViT-H/14-4B on ImageNet)"


def figure1b(results: dict, section: dict, scale: str, printed: pd.DataFrame) -> plt.Figure:
    """Our accuracy against epsilon per delta, beside `printed` (the paper's values, rows
    'delta=...', columns 'epsilon=...') and the earlier results the paper cites."""
    cells = study_cells(results)
    ours = stand_in_label(results, scale)
    figure, axis = plt.subplots(figsize=(6.4, 5.6))
    for row in sorted({row for row, _ in cells if row.startswith("delta=")}, reverse=True):
        points = sorted((_epsilon(column), cell) for (r, column), cell in cells.items() if r == row)
        runs_with_spread(
            axis,
            [e for e, _ in points],
            [c.mean for _, c in points],
            [c.std for _, c in points],
            marker="o",
            capsize=3,
            label=f"{ours}, {row.replace('=', ' ')}",
        )
    plain = [cell for (row, _), cell in cells.items() if not row.startswith("delta=")]
    if plain:
        axis.axhline(plain[0].mean, color="grey", linestyle="--", label=f"{ours}, without privacy")
    _paper_lines(axis, printed)
    _chance_lines(axis, results, section)
    for label, epsilon, delta, accuracy in CITED:
        axis.scatter([epsilon], [accuracy], marker="x", color="black")
        right = epsilon > 5  # labels of the right-hand points go to their left, inside the axes
        axis.annotate(
            f"{label}\n(ImageNet, delta {delta:g})",
            (epsilon, accuracy),
            fontsize=7,
            textcoords="offset points",
            xytext=(-4 if right else 4, -14),
            ha="right" if right else "left",
        )
    axis.set_xscale("log")
    axis.set_xlabel("epsilon")
    axis.set_ylabel("test accuracy (%)")
    axis.set_title("One full-batch step of the last layer\n" + _stand_in(section, scale), fontsize=9)
    # Below the axes: the legend names the stand-ins in full and would cover the low-epsilon points.
    axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1, frameon=False)
    figure.tight_layout()
    return figure


def _panel(axis, points: list, label: str, log: bool | str = False) -> None:
    xs, means, stds = zip(*points) if points else ((), (), ())
    runs_with_spread(axis, xs, means, stds, marker="o", capsize=3, label=label)
    if log == "symlog":
        axis.set_xscale("symlog", linthresh=min([x for x in xs if x > 0] or [1e-3]))
    elif log:
        axis.set_xscale("log")


def figure2(results: dict, section: dict, scale: str) -> plt.Figure:
    cells = study_cells(results)
    ours = stand_in_label(results, scale)
    figure, axes = plt.subplots(1, 3, figsize=(13, 4))
    for optimizer in ("lamb", "sgd"):
        _panel(
            axes[0],
            lr_curve(results, f"(a) {optimizer}"),
            f"{ours}, " + ("LAMB" if optimizer == "lamb" else "SGD with momentum"),
            log=True,
        )
    mehta = section["mehta"]
    largest = max(mehta["batch_sizes"], key=mehta["batch_sizes"].get)
    axes[0].set(
        xlabel="learning rate",
        ylabel="test accuracy (%)",
        title=f"(a) without privacy, {mehta['epochs']:g} epochs at batch {largest}",
    )
    _chance_lines(axes[0], results, section)
    axes[0].legend(fontsize=7, loc="best")
    for axis, row, xlabel, log in (
        (axes[1], "(b) resolution", "input resolution (px)", False),
        (axes[2], "(c) init scale", "initialisation scale (x LeCun normal)", "symlog"),
    ):
        points = sorted((float(column), cell.mean, cell.std) for (r, column), cell in cells.items() if r == row)
        _panel(axis, points, f"{ours}, with privacy", log)
        _chance_lines(axis, results, section)
        axis.legend(fontsize=7, loc="best")
        axis.set(
            xlabel=xlabel, ylabel="test accuracy (%)", title=f"{row}: one full-batch step, epsilon {mehta['epsilon']:g}"
        )
    figure.suptitle(
        "DP-LAMB on the last layer: "
        + _stand_in(section, scale)
        + "; a non-zero init makes LAMB's first step ||w|| / ||update|| times smaller",
        fontsize=9,
    )
    figure.tight_layout()
    return figure


def draw(figure: str, results: dict, section: dict, scale: str, values: pd.DataFrame) -> plt.Figure:
    """Mehta et al.'s `figure` ('figure1b' or 'figure2'), with the paper's values where it prints any."""
    if figure == "figure1b":
        return figure1b(results, section, scale, paper_table(values, "mehta", "figure1b"))
    return figure2(results, section, scale)
