"""DP-RandP Figures 6 and 7: how the privacy budget is shared between Phase II and Phase
III. The paper's shares are accounted here from its schedule (Table 13, Tables 17-21); ours
come from each run's own ledger."""

from __future__ import annotations

import functools
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dpvip.plan.dprandp_runs import MAIN_TASK, DPRandPPlan, PrivateRun, epsilon_label
from dpvip.plan.dprandp_rows import WARM_FULL, figure_runs
from dpvip.report.dprandp.figures import (
    COLORS,
    chance_line,
    finish_figure,
    paper_by_epsilon,
    paper_row,
    plot_points,
    run_stats,
)
from dpvip.report.dprandp.tables import mean_std

SWEEP_TABLES = {"table17": 2.0, "table18": 3.0, "table19": 4.0, "table20": 6.0, "table21": 8.0}  # Tables 17-21: epsilon
PAPER_SAMPLE_RATE = 4096 / 50000  # CIFAR-10, batch 4096
PAPER_STEPS_PER_EPOCH = 12  # the paper's count (96 steps = 8 epochs)
PAPER_DELTA = 1e-5
# The paper's shares (Figures 6 and 7) used Gopi et al.'s PRV accountant: ~8 s for Tables
# 17-21 here, against ~2 s for RDP, whose ratios are within 0.005 of PRV's on these settings
# (Figure 7: 0.3065 against 0.3099 at ε = 1, 0.1706 against 0.1675 at ε = 8); captions say which.
SHARE_ACCOUNTANT = "rdp"


@functools.lru_cache(maxsize=512)
def _paper_epsilon(sigma: float, steps: int, accountant: str) -> float:
    # Only Figures 6 and 7 account (the paper's shares), and only they pay for importing the
    # accountants (opacus, hence torch): Figures 2, 4 and 5 stay light jobs.
    from dpvip.privacy import accounting

    return accounting.epsilon([accounting.Mechanism(PAPER_SAMPLE_RATE, sigma, steps)], PAPER_DELTA, accountant).epsilon


def phase2_share(sigma: float, total: int, phase2_steps: int, accountant: str = SHARE_ACCOUNTANT) -> float:
    """ε of the first `phase2_steps` over ε of all `total` steps, in the paper's setting."""
    if phase2_steps <= 0:
        return 0.0
    if phase2_steps >= total:
        return 1.0
    return _paper_epsilon(sigma, phase2_steps, accountant) / _paper_epsilon(sigma, total, accountant)


def paper_schedule(paper_values: pd.DataFrame) -> tuple[dict[float, float], ...]:
    """The paper's CIFAR-10 schedule (Table 13), each {ε: value}: σ, total steps N, Phase II steps N_1."""
    return tuple(paper_by_epsilon(paper_values, "table13", row) for row in ("σ", "Total Steps", "Steps in Phase II"))


def paper_sweeps(paper_values: pd.DataFrame, accountant: str = SHARE_ACCOUNTANT) -> dict[float, dict[float, float]]:
    """{ε: {share of ε in Phase II: accuracy}}: Tables 17-21, plus ε = 1's two points (Tab. 6
    at 0 steps, Tab. 1 at Table 13's 96 steps)."""
    sigmas, totals, phase2 = paper_schedule(paper_values)

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


def run_phase2_share(run: PrivateRun, result: dict) -> float:
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
    accountant: str = SHARE_ACCOUNTANT,
) -> plt.Figure:
    """Accuracy against ε_Phase II / ε: our warm sweep (`dprandp.ablations.figure6`) and the
    paper's Tables 17-21 (x by `accountant` in the paper's setting: q = 4096/50000, Table 13's
    σ and steps, 12 steps an epoch)."""
    figure, axis = plt.subplots(figsize=(8.5, 4.4))
    sweeps = paper_sweeps(paper_values, accountant)
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(sweeps)))
    source = {epsilon: table.replace("table", "Tab. ") for table, epsilon in SWEEP_TABLES.items()}
    for color, (epsilon, points) in zip(colors, sweeps.items()):
        plot_points(
            axis,
            {x: (v, math.nan) for x, v in points.items()},
            color,
            f"ε = {epsilon_label(epsilon)} (paper, {source.get(epsilon, 'Tab. 6 / Tab. 1')})",
            paper=True,
        )
    epsilon, _ = plan.sweep("figure6")
    ours, seeds = {}, {}
    for runs in figure_runs(plan, "figure6")["warm"].values():
        done = [r for r in runs if r.path in results]
        if done:
            share = float(np.mean([run_phase2_share(r, results[r.path]) for r in done]))
            ours[share], seeds[share] = run_stats(done, results), len(done)
    counts = sorted(set(seeds.values()))
    over = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    label = f"ε = {epsilon_label(epsilon)} (ours, mean ± std over {over} seed(s))"
    plot_points(axis, ours, "black", label, paper=False)
    for share, n in seeds.items():  # how many seeds each point's mean is over
        axis.annotate(f"n={n}", (share, ours[share][0]), xytext=(4, 6), textcoords="offset points", fontsize=6)
    chance_line(
        axis,
        {
            r.path: results[r.path]
            for runs in figure_runs(plan, "figure6")["warm"].values()
            for r in runs
            if r.path in results
        },
    )
    caption = (
        f"Paper's x: {accountant.upper()} accounting of N1 = min(12 × epochs, N) of Tab. 13's N steps "
        "at its σ, q = 4096/50000, δ = 1e-5 "
        f"(the paper used PRV{'' if accountant == 'prv' else '; RDP ratios are within 0.005 of it here'}); "
        "ours: each run's own ε_Phase II / ε_spent; n = the seeds a point is the mean of (every seed run at "
        "that point, Figure 2's runs included)."
    )
    return finish_figure(
        figure,
        axis,
        "Fig. 6",
        "share of the budget spent in Phase II (CIFAR-10, warm start)",
        "ε spent in Phase II / ε",
        scale,
        results,
        caption,
        key="paper dashed; ours at {scale} scale solid (mean ± std over the n seeds marked at each point; {data})",
    )


def paper_shares(paper_values: pd.DataFrame, accountant: str = SHARE_ACCOUNTANT) -> dict[float, float]:
    """{ε: ε_1 / ε} of the paper's CIFAR-10 schedule (Figure 7, which prints no numbers):
    Appendix E's rule, N_1 = Table 13's Phase II steps of its N steps at its σ, q = 4096/50000."""
    sigmas, totals, phase2 = paper_schedule(paper_values)
    return {e: phase2_share(sigmas[e], int(totals[e]), int(phase2[e]), accountant) for e in sigmas}


def figure7(
    plan: DPRandPPlan,
    results: dict[str, dict],
    paper_values: pd.DataFrame,
    scale: str = "embedded",
    accountant: str = SHARE_ACCOUNTANT,
) -> plt.Figure:
    """ε_1 / ε, the share of the budget spent in Phase II, against the total ε: the paper's
    (`paper_shares`) and ours (each DP-RandP run's ε spent in Phase II over ε spent, from its
    ledger), each point of ours labelled with our schedule's N_1 / N."""
    figure, axis = plt.subplots(figsize=(8.5, 4.4))
    paper = paper_shares(paper_values, accountant)
    plot_points(
        axis, {e: (v, math.nan) for e, v in paper.items()}, COLORS[WARM_FULL], "DP-RandP (paper, Tab. 13)", True
    )
    ours = {}
    for epsilon, runs in figure_runs(plan, "figure7")[WARM_FULL].items():
        done = [r for r in runs if r.path in results and results[r.path]["privacy"].get("epsilon_spent")]
        if done:
            ours[epsilon] = mean_std([run_phase2_share(r, results[r.path]) for r in done])
    plot_points(axis, ours, COLORS[WARM_FULL], "DP-RandP (ours, the runs' ledgers)", False)
    for epsilon, (share, _) in ours.items():
        entry = plan.entry(MAIN_TASK, epsilon)
        axis.annotate(
            f"{entry.phase2_steps}/{entry.steps}",
            (epsilon, share),
            xytext=(5, 5),
            textcoords="offset points",
            fontsize=7,
        )
    _, totals, phase2 = paper_schedule(paper_values)
    for epsilon, share in paper.items():
        axis.annotate(
            f"{phase2[epsilon]:g}/{totals[epsilon]:g}",
            (epsilon, share),
            xytext=(4, -10),
            textcoords="offset points",
            fontsize=6,
            color=COLORS[WARM_FULL],
        )
    axis.set_ylim(0, 1)
    unshared = [e for e in plan.epsilons(MAIN_TASK) if math.isinf(e)]
    caption = (
        f"Paper: Appendix E's rule (Fig. 7 prints no numbers): ε_1 = {accountant.upper()} ε of the first N_1 "
        "(Tab. 13's Phase II steps) of its N steps at its σ, q = 4096/50000, δ = 1e-5 "
        f"(the paper used PRV{'' if accountant == 'prv' else '; RDP ratios are within 0.005 of it here'}). "
        "Ours: ε_Phase II / ε_spent of each run's own ledger (its accountant, q = B/n, σ), mean over seeds. "
        "Labels: N_1/N, the Phase II steps of all the steps."
        + (" ε = ∞ (no noise) has no budget to share and is not drawn." if unshared else "")
    )
    return finish_figure(
        figure,
        axis,
        "Fig. 7",
        "share of the budget spent in Phase II against the total ε (CIFAR-10)",
        "ε (δ = 1e-5)",
        scale,
        results,
        caption,
        ylabel="ε_1 / ε (Phase II's share)",
    )
