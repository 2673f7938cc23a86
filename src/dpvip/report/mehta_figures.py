"""Mehta et al.'s Figures 1b and 2 from our runs (the paper prints no numbers for them; the
earlier results Figure 1b compares against are in its text and are drawn as markers).

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

from dpvip.report.transfer_cells import lr_curve, study_cells

# Earlier ImageNet results Figure 1b's caption compares against: (label, epsilon, delta, top-1 %).
CITED = [
    ("Kurakin et al. (2022), 70 epochs", 10.0, 1e-6, 47.9),
    ("De et al. (2022)", 8.0, 8e-7, 81.1),
    ("De et al. (2022)", 1.0, 8e-7, 77.1),
]


def _stand_in(section: dict, scale: str) -> str:
    mehta = section["mehta"]
    return f"{scale} scale: {mehta['main']} on {mehta['datasets']['ImageNet-1k']} (paper: ViT-H/14-4B on ImageNet)"


def figure1b(results: dict, section: dict, scale: str) -> plt.Figure:
    cells = study_cells(results)
    figure, axis = plt.subplots(figsize=(6.4, 4.4))
    for row in sorted({row for row, _ in cells if row.startswith("delta=")}, reverse=True):
        points = sorted(
            (float(column.removeprefix("epsilon=")), cell) for (r, column), cell in cells.items() if r == row
        )
        axis.errorbar(
            [e for e, _ in points],
            [c.mean for _, c in points],
            yerr=[0 if c.std != c.std else c.std for _, c in points],
            marker="o",
            capsize=3,
            label=f"ours, {row.replace('=', ' ')}",
        )
    plain = [cell for (row, _), cell in cells.items() if not row.startswith("delta=")]
    if plain:
        axis.axhline(plain[0].mean, color="grey", linestyle="--", label="ours, without privacy")
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
    axis.legend(fontsize=8, loc="lower right")
    return figure


def _panel(axis, points: list, label: str, log: bool | str = False) -> None:
    xs, means, stds = zip(*points) if points else ((), (), ())
    axis.errorbar(xs, means, yerr=[0 if s != s else s for s in stds], marker="o", capsize=3, label=label)
    if log == "symlog":
        axis.set_xscale("symlog", linthresh=min([x for x in xs if x > 0] or [1e-3]))
    elif log:
        axis.set_xscale("log")


def figure2(results: dict, section: dict, scale: str) -> plt.Figure:
    cells = study_cells(results)
    figure, axes = plt.subplots(1, 3, figsize=(13, 4))
    for optimizer in ("lamb", "sgd"):
        _panel(
            axes[0],
            lr_curve(results, f"(a) {optimizer}"),
            "LAMB" if optimizer == "lamb" else "SGD with momentum",
            log=True,
        )
    mehta = section["mehta"]
    largest = max(mehta["batch_sizes"], key=mehta["batch_sizes"].get)
    axes[0].set(
        xlabel="learning rate",
        ylabel="test accuracy (%)",
        title=f"(a) without privacy, {mehta['epochs']:g} epochs at batch {largest}",
    )
    axes[0].legend(fontsize=8)
    for axis, row, xlabel, log in (
        (axes[1], "(b) resolution", "input resolution (px)", False),
        (axes[2], "(c) init scale", "initialisation scale (x LeCun normal)", "symlog"),
    ):
        points = sorted((float(column), cell.mean, cell.std) for (r, column), cell in cells.items() if r == row)
        _panel(axis, points, "with privacy", log)
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
