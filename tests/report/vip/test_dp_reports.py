"""The DP runs table (our sigma beside ViP Table 10's) and the DP loss figures."""

import math

import pytest

from dpvip.report.vip.dp_figures import dp_loss_figure
from dpvip.report.vip.dp_tables import vip_dp_runs
from dpvip.report.common.paper_values import load_paper_values


def ledger(examples: int, batch: int, sigma: float, init: str = "syn_vip/model.pt") -> dict:
    return {
        "accountant": "rdp",
        "sample_rate": batch / examples,
        "noise_multiplier": sigma,
        "clip_norm": 0.1,
        "delta": 1 / (2 * examples),
        "target_epsilon": 8.0,
        "planned_steps": 6100,
        "steps_done": 6100,
        "epsilon_spent": 7.99,
        "examples": examples,
        "init": init,
    }


def metrics(losses: list[float]) -> list[dict]:
    return [{"step": 10 * (i + 1), "loss": loss, "lr": 1e-4} for i, loss in enumerate(losses)]


def test_table_puts_table_10_sigma_beside_ours_where_the_paper_trained_the_same_run(root):
    runs = {
        "vip_base": (ledger(233_000_000, 98304, 0.481), metrics([0.9, 0.7])),
        "vip_base_n2000000": (ledger(2_000_000, 98304, 2.47), metrics([0.9, 0.8])),
        "vip_micro": (ledger(8192, 512, 0.61, init="random"), metrics([1.0])),
    }
    table = vip_dp_runs(runs, load_paper_values(root / "config" / "paper_values")).set_index("run")
    assert table.loc["vip_base", "σ (paper)"] == 0.48 and table.loc["vip_base", "σ (ours)"] == 0.481
    assert table.loc["vip_base_n2000000", "σ (paper)"] == 2.50
    assert math.isnan(table.loc["vip_micro", "σ (paper)"])
    assert table.loc["vip_micro", "init"] == "random" and table.loc["vip_micro", "B"] == 512
    assert table.loc["vip_base", "final loss"] == 0.7


@pytest.mark.parametrize("figure", ["vip_figure3a", "vip_figure3b", "vip_figure4a", "vip_figure4b", "vip_figure7"])
def test_loss_figures_label_what_they_vary(figure):
    runs = {
        "vip_micro_b128": (ledger(8192, 128, 0.5), metrics([1.0, 0.9])),
        "vip_micro_random": (ledger(8192, 512, 0.6, init="random"), metrics([1.2, 1.1])),
    }
    axis = dp_loss_figure(figure, runs).axes[0]
    labels = [line.get_label() for line in axis.get_lines()]
    expected = {
        "vip_figure3a": ["n=8,192, σ=0.5", "n=8,192, σ=0.6"],
        "vip_figure3b": ["(Syn)-ViP init", "random init"],
        "vip_figure4b": ["B=128, σ=0.5", "B=512, σ=0.6"],
    }.get(figure, ["micro_b128", "micro"])
    assert labels == expected
    x_first = axis.get_lines()[0].get_xdata()
    assert list(x_first) == ([10 * 128, 20 * 128] if figure == "vip_figure4b" else [10, 20])


def test_a_run_says_which_initialisation_it_starts_from():
    from dpvip.report.vip.dp_tables import initialisation

    assert initialisation("random") == "random init"
    assert initialisation("results/pretrain/syn_vip_micro/model.pt") == "(Syn)-ViP init"
    assert initialisation("results/pretrain/syn_vip_micro_e2/model.pt") == (
        "(Syn)-ViP init, 2 epochs of synthetic pre-training"
    )
