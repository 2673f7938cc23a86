"""DP-RandP Figures 2 (accuracy against ε, with previous work), 4 (warm against cold start
along σ) and 6 (accuracy against the share of the budget spent in Phase II).

The paper's numbers (from config/paper_values/dprandp.csv) are dashed lines, ours solid with
the std over seeds as error bars. Ours are the EMA model's test accuracy of the runs of
`figure_runs(plan, <figure>)`; `results` maps `PrivateRun.path` to the result JSON.
"""

from __future__ import annotations

import functools
import math
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dpvip.plan.dprandp_runs import DPRandPPlan, PrivateRun, epsilon_label, parse_epsilon
from dpvip.plan.dprandp_rows import COLD_ROW, WARM_FULL, WARM_NO_PHASE2, figure_runs
from dpvip.report.dprandp_tables import mean_std, run_values, stand_in_text
from dpvip.report.paper_values import paper_table

LINEAR_PROBING = "Phase II only"
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
SWEEP_TABLES = {"table17": 2.0, "table18": 3.0, "table19": 4.0, "table20": 6.0, "table21": 8.0}  # Tables 17-21: epsilon
PAPER_SAMPLE_RATE = 4096 / 50000  # CIFAR-10, batch 4096
PAPER_STEPS_PER_EPOCH = 12  # the paper's count (96 steps = 8 epochs)
PAPER_DELTA = 1e-5
# The paper's x used Gopi et al.'s PRV accountant: ~8 s for Tables 17-21 here, against ~2 s
# for RDP, whose ratios are within 0.005 of PRV's on these settings; the caption says which.
FIGURE6_ACCOUNTANT = "rdp"


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


def _stats(runs: list[PrivateRun], results: dict[str, dict]) -> tuple[float, float]:
    return mean_std(run_values(runs, results))


def _plot(axis, points: dict[float, tuple[float, float]], color: str, label: str, paper: bool) -> None:
    """One line through finite x (points: {x: (mean, std)}), NaN means dropped."""
    xs = sorted(x for x, (mean, _) in points.items() if not math.isnan(mean))
    if not xs:
        return
    means = [points[x][0] for x in xs]
    errors = [0.0 if math.isnan(points[x][1]) else points[x][1] for x in xs]
    style = (
        {"linestyle": "--", "marker": "s", "alpha": 0.6, "markersize": 4}
        if paper
        else {"linestyle": "-", "marker": "o", "capsize": 3, "linewidth": 2}
    )
    axis.errorbar(xs, means, yerr=None if paper else errors, color=color, label=label, **style)


def _finish(
    figure: plt.Figure, axis, name: str, what: str, xlabel: str, scale: str, results: dict[str, dict], caption: str = ""
) -> plt.Figure:
    """Labels, the legend beside the plot, the title (scale, stand-in) and a caption."""
    axis.set_xlabel(xlabel)
    axis.set_ylabel("test accuracy (%)")
    axis.legend(fontsize=6.5, loc="center left", bbox_to_anchor=(1.01, 0.5))
    axis.set_title(
        f"DP-RandP {name}: {what}\npaper dashed; ours at {scale} scale solid "
        f"(mean ± std over seeds; {stand_in_text(results)})",
        fontsize=9,
    )
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
        name: {e: _stats(runs, results) for e, runs in cells.items()}
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
        _plot(
            axis,
            x_of({e: v for e, v in points.items() if math.isfinite(e)}),
            COLORS.get(name, OTHER_COLORS.get(name)),
            f"{name} (paper, {FIGURE2_PAPER[name][0].replace('table', 'Tab. ')})",
            paper=True,
        )
        _plot(
            axis,
            x_of({e: v for e, v in points.items() if math.isinf(e)}),
            COLORS.get(name, OTHER_COLORS.get(name)),
            None,
            paper=True,
        )
    for name, points in ours.items():
        _plot(
            axis,
            x_of({e: v for e, v in points.items() if math.isfinite(e)}),
            COLORS[name],
            f"{name} (ours)",
            paper=False,
        )
        _plot(axis, x_of({e: v for e, v in points.items() if math.isinf(e)}), COLORS[name], None, paper=False)
    axis.axvline((finite[-1] + inf_x) / 2, color="grey", linestyle=":", linewidth=1)
    axis.set_xticks([*finite, inf_x], [*map(epsilon_label, finite), "∞"])
    caption = (
        "The paper's Phase II only is its private linear probing "
        "(Tab. 4, ε ≥ 1 shown: a 4096-d embedding layer, Tab. 22's settings); "
        "ours is Phase II for all the steps of our schedule. ε = ∞ (no noise) sits at its own tick."
    )
    return _finish(
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
        _plot(
            axis, points, COLORS[init], f"{init} (paper, {table.replace('table', 'Tab. ')} at Tab. 13's σ)", paper=True
        )
        lines[("paper", init)] = points
    for init, cells in figure_runs(plan, "figure4").items():
        points = {_sigma(e, runs, results): _stats(runs, results) for e, runs in cells.items()}
        points = {x: v for x, v in points.items() if not math.isnan(x)}
        _plot(axis, points, COLORS[init], f"{init} (ours)", paper=False)
        lines[("ours", init)] = points
    _gaps(axis, lines[("paper", "warm")], lines[("paper", "cold")], "grey", paper=True)
    _gaps(axis, lines[("ours", "warm")], lines[("ours", "cold")], "black", paper=False)
    caption = (
        "The paper's cold point at ε = 6 (σ 2.9) is Tab. 11's 71.0; "
        "Tab. 1 prints 77.0 for the same De et al. baseline. Ours: σ of the runs' own calibration."
    )
    return _finish(
        figure,
        axis,
        "Fig. 4",
        "warm (synthetic Phase I) vs cold (random) start, the gap annotated",
        "noise multiplier σ (0: no noise, ε = ∞)",
        scale,
        results,
        caption,
    )


@functools.lru_cache(maxsize=512)
def _paper_epsilon(sigma: float, steps: int, accountant: str) -> float:
    # Only Figure 6 accounts (the paper's x-axis), and only it pays for importing the
    # accountants (opacus, hence torch): Figures 2 and 4 stay light jobs.
    from dpvip.privacy import accounting

    return accounting.epsilon([accounting.Mechanism(PAPER_SAMPLE_RATE, sigma, steps)], PAPER_DELTA, accountant).epsilon


def phase2_share(sigma: float, total: int, phase2_steps: int, accountant: str = FIGURE6_ACCOUNTANT) -> float:
    """ε of the first `phase2_steps` over ε of all `total` steps, in the paper's setting."""
    if phase2_steps <= 0:
        return 0.0
    if phase2_steps >= total:
        return 1.0
    return _paper_epsilon(sigma, phase2_steps, accountant) / _paper_epsilon(sigma, total, accountant)


def paper_sweeps(paper_values: pd.DataFrame, accountant: str = FIGURE6_ACCOUNTANT) -> dict[float, dict[float, float]]:
    """{ε: {share of ε in Phase II: accuracy}}: Tables 17-21, plus ε = 1's two points (Tab. 6
    at 0 steps, Tab. 1 at Table 13's 96 steps)."""
    sigmas, totals = (paper_by_epsilon(paper_values, "table13", row) for row in ("σ", "Total Steps"))
    phase2 = paper_by_epsilon(paper_values, "table13", "Steps in Phase II")

    def share(epsilon: float, steps: float) -> float:
        return phase2_share(sigmas[epsilon], int(totals[epsilon]), int(min(steps, totals[epsilon])), accountant)

    sweeps = {
        1.0: {
            0.0: paper_by_epsilon(paper_values, "table6", "Accuracy(%)")[1.0],
            share(1.0, phase2[1.0]): paper_by_epsilon(paper_values, "table1", "DP-RandP")[1.0],
        }
    }
    for table, epsilon in SWEEP_TABLES.items():
        row = paper_row(paper_values, table, "Accuracy (%)", prefix="Epochs for Phase II=")
        sweeps[epsilon] = {share(epsilon, PAPER_STEPS_PER_EPOCH * float(k)): v for k, v in row.items()}
    return sweeps


def _run_share(run: PrivateRun, result: dict) -> float:
    """ε spent in Phase II over ε spent (Phase II's share of the steps when ε = ∞)."""
    privacy = result["privacy"]
    if run.phase2_steps == 0:
        return 0.0
    if privacy.get("epsilon_spent") is None:
        return run.phase2_steps / result["steps"]
    return privacy["epsilon_phase2"] / privacy["epsilon_spent"]


def figure6(
    plan: DPRandPPlan,
    results: dict[str, dict],
    paper_values: pd.DataFrame,
    scale: str = "embedded",
    accountant: str = FIGURE6_ACCOUNTANT,
) -> plt.Figure:
    """Accuracy against ε_Phase II / ε: our warm sweep (`dprandp.ablations.figure6`) and the
    paper's Tables 17-21 (x by `accountant` in the paper's setting: q = 4096/50000, Table 13's
    σ and steps, 12 steps an epoch)."""
    figure, axis = plt.subplots(figsize=(8.5, 4.4))
    sweeps = paper_sweeps(paper_values, accountant)
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(sweeps)))
    source = {epsilon: table.replace("table", "Tab. ") for table, epsilon in SWEEP_TABLES.items()}
    for color, (epsilon, points) in zip(colors, sweeps.items()):
        _plot(
            axis,
            {x: (v, math.nan) for x, v in points.items()},
            color,
            f"ε = {epsilon_label(epsilon)} (paper, {source.get(epsilon, 'Tab. 6 / Tab. 1')})",
            paper=True,
        )
    epsilon, _ = plan.sweep("figure6")
    ours = {}
    for runs in figure_runs(plan, "figure6")["warm"].values():
        done = [r for r in runs if r.path in results]
        if done:
            ours[float(np.mean([_run_share(r, results[r.path]) for r in done]))] = _stats(done, results)
    _plot(axis, ours, "black", f"ε = {epsilon_label(epsilon)} (ours)", paper=False)
    caption = (
        f"Paper's x: {accountant.upper()} accounting of N1 = min(12 × epochs, N) of Tab. 13's N steps "
        "at its σ, q = 4096/50000, δ = 1e-5 "
        f"(the paper used PRV{'' if accountant == 'prv' else '; RDP ratios are within 0.005 of it here'}); "
        "ours: each run's own ε_Phase II / ε_spent."
    )
    return _finish(
        figure,
        axis,
        "Fig. 6",
        "share of the budget spent in Phase II (CIFAR-10, warm start)",
        "ε spent in Phase II / ε",
        scale,
        results,
        caption,
    )
