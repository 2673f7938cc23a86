"""DP-RandP Figures 2, 4, 5, 6 and 7 on fake results: they build, save (PNG and PDF) and plot
our means where they belong; the paper's Figure 6 x and Figure 7 y come from the accountant;
captions name the paper's inconsistent numbers they draw."""

from __future__ import annotations

import math

import pytest

from dpvip.plan.dprandp_rows import figure_runs
from dpvip.plan.dprandp_runs import DPRandPPlan
from dpvip.report.dprandp.budget_figures import figure6, figure7, paper_sweeps, phase2_share
from dpvip.report.dprandp.figures import figure2, figure4, figure5
from dpvip.report.common.figures import save_figure

from dprandp.test_tables import CONFIG, PLAN, VALUES, fake_results, plan_with_inf


def lines(figure) -> dict[str, tuple]:
    """{legend label: (xs, ys)} of the figure's labelled lines (error-bar containers)."""
    drawn = {}
    for container in (c for axis in figure.axes for c in axis.containers if not c.get_label().startswith("_")):
        line = container.lines[0]
        drawn[container.get_label()] = ([float(x) for x in line.get_xdata()], [float(y) for y in line.get_ydata()])
    return drawn


def test_figure2_draws_ours_solid_beside_the_papers_and_saves(tmp_path):
    figure = figure2(PLAN, fake_results("figure2"), VALUES, scale="embedded")
    drawn = lines(figure)
    xs, ys = drawn["DP-RandP (ours)"]
    assert xs == [1.0, 8.0] and ys == pytest.approx([65.5, 69.0])  # the seeds' means
    assert drawn["Tramèr and Boneh [61] (paper, Tab. 1)"][1] == [60.3, 67.2, 69.3]  # inf drawn apart
    assert drawn["DP-RandP w/o Phase II (paper, Tab. 6)"][0] == [1.0, 2.0, 3.0, 4.0, 6.0, 8.0]
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels[-1] == "∞" and labels[0] == "1"
    assert (
        "ours at embedded scale" in figure.axes[0].get_title() and "scikit-learn digits" in figure.axes[0].get_title()
    )
    save_figure(figure, tmp_path / "dprandp_figure2.png")
    assert (tmp_path / "dprandp_figure2.png").stat().st_size > 0 and (tmp_path / "dprandp_figure2.pdf").exists()


def test_figure4_puts_ours_at_the_runs_sigma_and_the_papers_at_table13s(tmp_path):
    results = fake_results("figure4")
    figure = figure4(PLAN, results, VALUES)
    drawn = lines(figure)
    assert drawn["warm (ours)"][0] == [1.25, 10.0]  # the fake runs' sigma: 10 / epsilon
    assert drawn["cold (ours)"][1] == pytest.approx([45.0, 41.5])
    assert drawn["warm (paper, Tab. 6 at Tab. 13's σ)"][0] == [0.0, 2.6, 2.9, 3.8, 4.7, 5.6, 9.3]
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert "+20.0" in texts and "+12.2" in texts  # our gap at both sigmas; the paper's 69.03 - 56.8 at sigma 9.3
    save_figure(figure, tmp_path / "dprandp_figure4.png")
    assert (tmp_path / "dprandp_figure4.pdf").exists()


def test_figure6_x_is_the_share_of_epsilon_spent_in_phase2(tmp_path):
    results = fake_results("figure6")
    figure = figure6(PLAN, results, VALUES)
    xs, ys = lines(figure)["ε = 1 (ours, mean ± std over 2 seed(s))"]
    # fake epsilon_phase2 / epsilon_spent = sqrt(p / 24) for p in 0, 4, 12, 24
    assert xs == pytest.approx([0.0, math.sqrt(4 / 24), math.sqrt(12 / 24), 1.0])
    assert ys == pytest.approx([61.5, 65.5, 69.5, 69.5])
    assert "RDP" in " ".join(t.get_text() for t in figure.texts)
    save_figure(figure, tmp_path / "dprandp_figure6.png")
    assert (tmp_path / "dprandp_figure6.png").exists() and (tmp_path / "dprandp_figure6.pdf").exists()


def test_figure6_points_are_the_mean_over_every_seed_run_there():
    """One ablation seed, three main seeds: the points Figure 2 also runs (0, 4 = the schedule's,
    24 = all Phase II steps) are the mean ± std over the three, the others seed 0 alone."""
    section = {**PLAN.section, "private": {**PLAN.section["private"], "seeds": [0, 1, 2]}}
    section["ablations"] = {**section["ablations"], "seeds": [0]}
    plan = DPRandPPlan(section, CONFIG["synthetic"]["datasets"])
    runs = figure_runs(plan, "figure6")["warm"]
    assert {steps: sorted(r.seed for r in rs) for steps, rs in runs.items()} == {
        0: [0, 1, 2],
        4: [0, 1, 2],
        12: [0],
        24: [0, 1, 2],
    }
    results = fake_results("figure6", plan=plan)
    figure = figure6(plan, results, VALUES)
    label = "ε = 1 (ours, mean ± std over 1-3 seed(s)); hollow: one run"
    xs, ys = lines(figure)[label]
    # default_accuracy: 60 + min(p, 8) + 0.5 + 2 x seed, so seeds 0-2 average 2 points above seed 0
    assert ys == pytest.approx([62.5, 66.5, 68.5, 70.5])
    errors = next(c for a in figure.axes for c in a.containers if c.get_label() == label).lines[2][0]
    spans = sorted(round(seg[1][1] - seg[0][1], 6) for seg in errors.get_segments())
    assert spans == [4.0, 4.0, 4.0]  # ± std 2 over three seeds; no bar (not one of length 0) for one seed
    hollow = [
        c
        for a in figure.axes
        for c in a.collections
        if len(c.get_facecolor()) and tuple(c.get_facecolor()[0]) == (1, 1, 1, 1)
    ]
    assert [tuple(c.get_offsets()[0])[1] for c in hollow] == [pytest.approx(68.5)]  # the one-seed point, hollow
    marks = [t.get_text() for a in figure.axes for t in a.texts]
    assert sorted(m for m in marks if m.startswith("n=")) == ["n=1", "n=3", "n=3", "n=3"]


def test_the_papers_figure6_shares_follow_the_accountant():
    sweeps = paper_sweeps(VALUES)
    assert list(sweeps) == [1.0, 2.0, 3.0, 4.0, 6.0, 8.0]
    shares = list(sweeps[2.0])  # Table 17: epochs 0, 1, 4, ..., 94 (94 x 12 > 1125: all steps)
    assert shares[0] == 0.0 and shares[-1] == 1.0 and shares == sorted(shares)
    assert sweeps[2.0][1.0] == 63.10 and sweeps[1.0][0.0] == 69.03
    assert 0.25 < phase2_share(9.3, 875, 96) < 0.35  # the paper's main setting at epsilon 1
    assert phase2_share(9.3, 875, 96) == phase2_share(9.3, 875, 96)  # deterministic


def test_epsilon_inf_sits_at_its_own_tick_and_at_sigma_zero():
    plan = plan_with_inf()
    figure = figure2(plan, fake_results("figure2", plan=plan), VALUES)
    axis = figure.axes[0]
    at_inf = [c for c in axis.containers if list(c.lines[0].get_xdata()) == [axis.get_xticks()[-1]]]
    assert len(at_inf) == 8  # ours: 4 series; the paper's: DP-RandP, w/o Phase II, De et al., Tramer and Boneh
    drawn = lines(figure4(plan, fake_results("figure4", plan=plan), VALUES))
    assert drawn["warm (ours)"][0] == [0.0, 1.25, 10.0]


def with_curves(results: dict) -> dict:
    """Each run's curve: 24 steps from ln 10 down by 0.01 a step (0.02 warm), +0.1 per seed."""
    for result in results.values():
        slope = 0.02 if result["run"]["init"] != "cold" else 0.01
        result["curve"] = [
            {"step": s, "phase": 3, "loss": 2.3 - slope * s + 0.1 * result["run"]["seed"]} for s in range(1, 25)
        ]
    return results


def plotted(figure) -> dict[str, object]:
    """{legend label: Line2D} of the figure's labelled plain lines."""
    return {
        line.get_label(): line for axis in figure.axes for line in axis.lines if not line.get_label().startswith("_")
    }


def test_figure5_draws_warm_and_cold_loss_curves_at_the_smallest_and_largest_epsilon(tmp_path):
    figure = figure5(PLAN, with_curves(fake_results("figure5")), VALUES)
    drawn = plotted(figure)
    warm_small = drawn["warm (w/o Phase II), ε = 1, σ 10: final test 61.5% (2 seeds)"]
    assert list(warm_small.get_xdata()) == list(range(1, 25)) and warm_small.get_linestyle() == "-"
    assert warm_small.get_ydata()[0] == pytest.approx(2.3 - 0.02 + 0.05)  # mean of seeds 0 and 1
    cold_large = drawn["cold (Phase III only), ε = 8, σ 1.25: final test 45.0% (2 seeds)"]
    assert cold_large.get_linestyle() == "--" and cold_large.get_ydata()[-1] == pytest.approx(2.3 - 0.24 + 0.05)
    assert drawn["ln 10: uniform guess"].get_ydata()[0] == pytest.approx(math.log(10))
    legend = figure.axes[0].get_legend().get_title().get_text()
    assert legend == "embedded scale; scikit-learn digits stands in for CIFAR-10"
    assert "solid ε = 1 (most noise), dashed ε = 8" in figure.axes[0].get_title()
    save_figure(figure, tmp_path / "dprandp_figure5.png")
    assert (tmp_path / "dprandp_figure5.pdf").exists()


def test_figure5_takes_epsilon_inf_as_its_noiseless_curve():
    plan = plan_with_inf()
    drawn = plotted(figure5(plan, with_curves(fake_results("figure5", plan=plan)), VALUES))
    assert {label.split(":")[0] for label in drawn if label.startswith("cold")} == {
        "cold (Phase III only), ε = 1, σ 10",
        "cold (Phase III only), ε = inf, σ 0",
    }


def test_figure7_puts_our_ledgers_share_beside_the_papers_rule():
    figure = figure7(PLAN, fake_results("figure7"), VALUES)
    drawn = lines(figure)
    xs, ys = drawn["DP-RandP (ours, the runs' ledgers)"]
    assert xs == [1.0, 8.0] and ys == pytest.approx([math.sqrt(4 / 24)] * 2)  # fake epsilon_phase2
    xs, ys = drawn["DP-RandP (paper, Tab. 13)"]
    assert xs == [1.0, 2.0, 3.0, 4.0, 6.0, 8.0] and ys == sorted(ys, reverse=True)  # the share falls as ε grows
    assert ys[0] == pytest.approx(phase2_share(9.3, 875, 96)) and 0.25 < ys[0] < 0.35
    labels = [text.get_text() for text in figure.axes[0].texts]
    assert "4/24" in labels and "96/875" in labels and "96/2468" in labels
    plan = plan_with_inf()
    figure = figure7(plan, fake_results("figure7", plan=plan), VALUES)
    assert lines(figure)["DP-RandP (ours, the runs' ledgers)"][0] == [1.0, 8.0]  # inf shares no budget
    assert "ε = ∞ (no noise) has no budget to share" in figure.texts[0].get_text()


def test_figures_drawing_a_conflicting_number_say_so():
    caption2 = figure2(PLAN, fake_results("figure2"), VALUES).texts[0].get_text().replace("\n", " ")
    assert "shown here: 77.0 (Table 1)" in caption2 and "shown here: 82.90 (Table 6)" in caption2
    caption4 = figure4(PLAN, fake_results("figure4"), VALUES).texts[0].get_text().replace("\n", " ")
    assert "shown here: 71.0 (Table 11)" in caption4 and "shown here: 82.90 (Table 6)" in caption4
