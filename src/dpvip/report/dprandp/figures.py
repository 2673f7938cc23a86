"""DP-RandP Figures 2 (accuracy against ε, with previous work), 4 (warm against cold start
along σ) and 5 (warm against cold training curves at two budgets), and the plotting the
budget-share Figures 6 and 7 (`budget_figures`) share with them.

The paper's numbers (from config/paper_values/dprandp.csv) are dashed lines, ours solid with
the std over seeds as error bars. Ours are the EMA model's test accuracy of the runs of
`figure_runs(plan, <figure>)` (Figure 5: their training loss; Figure 7: their privacy
ledgers); `results` maps `PrivateRun.path` to the result JSON.
"""

from __future__ import annotations

import math
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dpvip.plan.dprandp_runs import MAIN_TASK, DPRandPPlan, PrivateRun, epsilon_label, parse_epsilon
from dpvip.plan.dprandp_rows import COLD_ROW, PHASE2_ONLY, WARM_FULL, WARM_NO_PHASE2, curve_epsilons, figure_runs
from dpvip.report.dprandp.conflicts import conflict_notes
from dpvip.report.common.figures import runs_with_spread
from dpvip.report.dprandp.tables import mean_std, run_chances, run_values, stand_in_text
from dpvip.report.common.paper_values import paper_table

LINEAR_PROBING = PHASE2_ONLY
COLORS = {
    WARM_FULL: "tab:blue",
    WARM_NO_PHASE2: "tab:orange",
    LINEAR_PROBING: "tab:green",
    COLD_ROW: "tab:red",
    "warm": "tab:orange",
    "cold": "tab:red",
}
# Figure 2's paper lines: {legend: (table, row)}; the first four are our series' counterparts.
FIGURE2_PAPER = {
    WARM_FULL: ("table1", "DP-RandP"),
    WARM_NO_PHASE2: ("table6", "Accuracy(%)"),
    LINEAR_PROBING: ("table4", "Ours (Std.)"),
    COLD_ROW: ("table1", "De et al. [15]"),
    "Tramèr and Boneh [61]": ("table1", "Tramèr and Boneh [61]"),
    "Hölzl et al. [35]": ("table1", "Hölzl et al. [35]"),
}
OTHER_COLORS = {"Tramèr and Boneh [61]": "tab:purple", "Hölzl et al. [35]": "tab:brown"}
FIGURE4_PAPER = {"warm": ("table6", "Accuracy(%)"), "cold": ("table11", COLD_ROW)}
CURVE_VARIANTS = {"warm": "w/o Phase II", "cold": "Phase III only"}  # Figure 5's legend


def paper_row(values: pd.DataFrame, table: str, row: str, prefix: str = "epsilon=") -> dict:
    """{column value: paper value} of one printed row, std cells and blanks left out."""
    printed = paper_table(values, "dprandp", table).loc[row]
    return {
        c.removeprefix(prefix): float(v)
        for c, v in printed.items()
        if c.startswith(prefix) and not c.endswith(" std") and not math.isnan(v)
    }


def paper_by_epsilon(values: pd.DataFrame, table: str, row: str) -> dict[float, float]:
    return {parse_epsilon(k): v for k, v in paper_row(values, table, row).items()}


def run_stats(runs: list[PrivateRun], results: dict[str, dict]) -> tuple[float, float]:
    return mean_std(run_values(runs, results))


def plot_points(axis, points: dict[float, tuple[float, float]], color: str, label: str, paper: bool) -> None:
    """One line through finite x (points: {x: (mean, std)}), NaN means dropped. Ours carry
    their std over seeds as error bars; a point of one run (std NaN) has none and is drawn
    hollow, so that no zero-length bar reads as a measured spread."""
    xs = sorted(x for x, (mean, _) in points.items() if not math.isnan(mean))
    if not xs:
        return
    means = [points[x][0] for x in xs]
    errors = [points[x][1] for x in xs]
    style = (
        {"linestyle": "--", "marker": "s", "alpha": 0.6, "markersize": 4}
        if paper
        else {"linestyle": "-", "marker": "o", "capsize": 3, "linewidth": 2}
    )
    if paper:
        axis.errorbar(xs, means, color=color, label=label, **style)
    else:
        runs_with_spread(axis, xs, means, errors, color=color, label=label, **style)


def chance_line(axis, results: dict[str, dict]) -> None:
    """A dotted line at the chance level of the data the runs were tested on (one level only)."""
    chances = run_chances(MAIN_TASK, "test", results)
    if len(chances) == 1:
        level = next(iter(chances)).level
        axis.axhline(level, color="grey", linestyle=":", linewidth=1, label=f"chance ({level:.3g}%)")


def finish_figure(
    figure: plt.Figure,
    axis,
    name: str,
    what: str,
    xlabel: str,
    scale: str,
    results: dict[str, dict],
    caption: str = "",
    ylabel: str = "test accuracy (%)",
    key: str = "paper dashed; ours at {scale} scale solid (mean ± std over seeds, hollow: one run; {data})",
) -> plt.Figure:
    """Labels, the legend beside the plot (titled with the scale and the stand-in), the title
    with the line key, and a caption."""
    data = stand_in_text(results)
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    axis.legend(
        fontsize=6.5,
        loc="center left",
        bbox_to_anchor=(1.01, 0.5),
        title=f"{scale} scale; {data}",
        title_fontsize=6.5,
    )
    axis.set_title(f"DP-RandP {name}: {what}\n{key.format(scale=scale, data=data)}", fontsize=9)
    if caption:
        figure.text(0.01, -0.01, textwrap.fill(caption, 150), fontsize=6.5, ha="left", va="top")
    figure.tight_layout()
    return figure


def figure2(
    plan: DPRandPPlan, results: dict[str, dict], paper_values: pd.DataFrame, scale: str = "embedded"
) -> plt.Figure:
    """Test accuracy against ε on CIFAR-10: the paper's DP-RandP, w/o Phase II (Tab. 6), private
    linear probing (Tab. 4, ε ≥ 1) and previous work (Tab. 1), and our series; ε = ∞ sits at
    its own tick on the right."""
    ours = {
        name: {e: run_stats(runs, results) for e, runs in cells.items()}
        for name, cells in figure_runs(plan, "figure2").items()
    }
    paper = {
        name: {e: (v, math.nan) for e, v in paper_by_epsilon(paper_values, *where).items() if e >= 1}
        for name, where in FIGURE2_PAPER.items()
    }
    finite = sorted({e for points in [*ours.values(), *paper.values()] for e in points if math.isfinite(e)})
    inf_x = finite[-1] + max(1.0, 0.2 * (finite[-1] - finite[0]))

    def x_of(points):
        return {inf_x if math.isinf(e) else e: v for e, v in points.items()}

    figure, axis = plt.subplots(figsize=(9, 4.6))
    for name, points in paper.items():
        plot_points(
            axis,
            x_of({e: v for e, v in points.items() if math.isfinite(e)}),
            COLORS.get(name, OTHER_COLORS.get(name)),
            f"{name} (paper, {FIGURE2_PAPER[name][0].replace('table', 'Tab. ')})",
            paper=True,
        )
        plot_points(
            axis,
            x_of({e: v for e, v in points.items() if math.isinf(e)}),
            COLORS.get(name, OTHER_COLORS.get(name)),
            None,
            paper=True,
        )
    for name, points in ours.items():
        plot_points(
            axis,
            x_of({e: v for e, v in points.items() if math.isfinite(e)}),
            COLORS[name],
            f"{name} (ours)",
            paper=False,
        )
        plot_points(axis, x_of({e: v for e, v in points.items() if math.isinf(e)}), COLORS[name], None, paper=False)
    axis.axvline((finite[-1] + inf_x) / 2, color="grey", linestyle=":", linewidth=1)
    axis.set_xticks([*finite, inf_x], [*map(epsilon_label, finite), "∞"])
    chance_line(axis, results)
    caption = " ".join(
        [
            "The paper's Phase II only is its private linear probing "
            "(Tab. 4, ε ≥ 1 shown: a 4096-d embedding layer, Tab. 22's settings); "
            "ours is Phase II for all the steps of our schedule. ε = ∞ (no noise) sits at its own tick.",
            *conflict_notes(paper_values, set(FIGURE2_PAPER.values())),
        ]
    )
    return finish_figure(
        figure,
        axis,
        "Fig. 2",
        "CIFAR-10 test accuracy against ε",
        "ε (δ = 1e-5)",
        scale,
        results,
        caption,
    )


def _sigma(epsilon: float, runs: list[PrivateRun], results: dict[str, dict]) -> float:
    if math.isinf(epsilon):
        return 0.0
    sigmas = [results[r.path]["privacy"]["noise_multiplier"] for r in runs if r.path in results]
    return float(np.mean(sigmas)) if sigmas else math.nan


def _gaps(axis, warm: dict, cold: dict, color: str, paper: bool) -> None:
    """A vertical segment and '+gap' between warm and cold at each shared σ."""
    for x in sorted(set(warm) & set(cold)):
        (w, _), (c, _) = warm[x], cold[x]
        if math.isnan(w) or math.isnan(c):
            continue
        axis.plot([x, x], [c, w], color=color, linestyle=":", linewidth=1)
        axis.annotate(
            f"{w - c:+.1f}",
            (x, (w + c) / 2),
            xytext=(4, 0),
            textcoords="offset points",
            fontsize=7,
            color=color,
            fontweight="normal" if paper else "bold",
        )


def figure4(
    plan: DPRandPPlan, results: dict[str, dict], paper_values: pd.DataFrame, scale: str = "embedded"
) -> plt.Figure:
    """Accuracy against σ, warm (w/o Phase II) against cold (Phase III only) start; the paper's
    at Table 13's σ of each ε (0 for ∞), warm from Table 6, cold from Table 11."""
    sigmas = paper_by_epsilon(paper_values, "table13", "σ")
    figure, axis = plt.subplots(figsize=(8.5, 4.4))
    lines = {}
    for init, (table, row) in FIGURE4_PAPER.items():
        points = {
            0.0 if math.isinf(e) else sigmas[e]: (v, math.nan)
            for e, v in paper_by_epsilon(paper_values, table, row).items()
            if math.isinf(e) or e in sigmas
        }
        plot_points(
            axis, points, COLORS[init], f"{init} (paper, {table.replace('table', 'Tab. ')} at Tab. 13's σ)", paper=True
        )
        lines[("paper", init)] = points
    for init, cells in figure_runs(plan, "figure4").items():
        points = {_sigma(e, runs, results): run_stats(runs, results) for e, runs in cells.items()}
        points = {x: v for x, v in points.items() if not math.isnan(x)}
        plot_points(axis, points, COLORS[init], f"{init} (ours)", paper=False)
        lines[("ours", init)] = points
    _gaps(axis, lines[("paper", "warm")], lines[("paper", "cold")], "grey", paper=True)
    _gaps(axis, lines[("ours", "warm")], lines[("ours", "cold")], "black", paper=False)
    caption = " ".join(
        [
            "Ours: σ of the runs' own calibration.",
            *conflict_notes(paper_values, set(FIGURE4_PAPER.values())),
        ]
    )
    return finish_figure(
        figure,
        axis,
        "Fig. 4",
        "warm (synthetic Phase I) vs cold (random) start, the gap annotated",
        "noise multiplier σ (0: no noise, ε = ∞)",
        scale,
        results,
        caption,
    )


def mean_curve(curves: list[list[dict]]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(steps, mean loss, std loss) over runs at the steps every curve has (std 0 for one run)."""
    losses = [{point["step"]: point["loss"] for point in curve} for curve in curves]
    steps = sorted(set.intersection(*(set(loss) for loss in losses)))
    table = np.array([[loss[step] for step in steps] for loss in losses], dtype=float)
    std = table.std(axis=0, ddof=1) if len(losses) > 1 else np.zeros(len(steps))
    return steps, table.mean(axis=0), std


def figure5(
    plan: DPRandPPlan, results: dict[str, dict], paper_values: pd.DataFrame, scale: str = "embedded"
) -> plt.Figure:
    """Training loss against step, warm (w/o Phase II) against cold (Phase III only) start, at
    our smallest ε (solid, the most noise) and our largest (dashed; ε = ∞ is σ = 0): the
    paper's σ = 9.3 and σ = 0 at learning rate 0.4. The paper prints no numbers for its curves,
    so only ours are drawn."""
    figure, axis = plt.subplots(figsize=(10, 4.6))
    epsilons = curve_epsilons(plan)
    done_runs = {}
    for init, cells in figure_runs(plan, "figure5").items():
        for epsilon, runs in cells.items():
            done = [r for r in runs if r.path in results]
            if not done:
                continue
            steps, mean, std = mean_curve([results[r.path]["curve"] for r in done])
            color, solid = COLORS[init], epsilon == epsilons[0]
            accuracy, _ = run_stats(done, results)
            done_runs |= {r.path: results[r.path] for r in done}
            label = (
                f"{init} ({CURVE_VARIANTS[init]}), ε = {epsilon_label(epsilon)}, "
                f"σ {_sigma(epsilon, done, results):.3g}: final test {accuracy:.1f}% ({len(done)} seeds)"
            )
            axis.plot(steps, mean, color=color, linestyle="-" if solid else "--", linewidth=2, label=label)
            axis.fill_between(steps, mean - std, mean + std, color=color, alpha=0.12 if solid else 0.06)
    chances = run_chances(MAIN_TASK, "test", done_runs)
    if len(chances) == 1:  # the loss of a uniform guess: a curve near it has not learnt yet
        classes = chances.pop().classes
        axis.axhline(math.log(classes), color="grey", linestyle=":", linewidth=1, label=f"ln {classes}: uniform guess")
    learning_rates = {e: plan.entry(MAIN_TASK, e).lr_phase3 for e in epsilons}
    dashed = f", dashed ε = {epsilon_label(epsilons[-1])}" if len(epsilons) > 1 else ""
    caption = (
        "Paper (Fig. 5, no printed numbers): WRN-16-4 on CIFAR-10, σ = 9.3 (solid) and σ = 0 (dashed), "
        "learning rate 0.4; its warm and cold curves fall at the same rate under noise. "
        "Ours: the training loss of each step's Poisson batch (computed without noise, on private data), "
        "mean ± std over seeds; Phase III learning rate "
        + ", ".join(f"{lr:g} at ε = {epsilon_label(e)}" for e, lr in learning_rates.items())
        + ". Test accuracy is recorded only at the end of a run (in the legend)."
    )
    return finish_figure(
        figure,
        axis,
        "Fig. 5",
        "warm (synthetic Phase I) vs cold (random) start, training curves",
        "step",
        scale,
        results,
        caption,
        ylabel="training loss (cross-entropy)",
        key=f"ours at {{scale}} scale: solid ε = {epsilon_label(epsilons[0])} (most noise){dashed} ({{data}})",
    )
