"""The DP-RandP plan: run names, schedules, reuse of runs between tasks, bad config."""

from __future__ import annotations

import copy
import math

import pytest
import yaml

from dpvip.errors import DpvipInputError
from dpvip.plan.dprandp_runs import COLD, DPRandPPlan, epsilon_label, parse_epsilon
from dpvip.plan.dprandp_private import private_settings
from dpvip.plan.dprandp_rows import TABLES, all_runs, curve_epsilons, figure_runs, needs, table_rows


@pytest.fixture(scope="module")
def configs(root):
    from snakemake.utils import update_config

    embedded = yaml.safe_load((root / "config" / "config.yaml").read_text())
    paper = copy.deepcopy(embedded)  # --configfile merges paper.yaml over the embedded default
    update_config(paper, yaml.safe_load((root / "config" / "paper.yaml").read_text()))
    return embedded, paper


def plan_of(config, section=None):
    return DPRandPPlan(section or config["dprandp"], config["synthetic"]["datasets"])


def test_epsilon_labels_round_trip():
    assert [epsilon_label(e) for e in (1, 7.42, math.inf)] == ["1", "7.42", "inf"]
    assert parse_epsilon("inf") == math.inf and parse_epsilon(8) == 8.0
    with pytest.raises(DpvipInputError, match="positive"):
        parse_epsilon(0)


def test_embedded_runs_and_names(configs):
    plan = plan_of(configs[0])
    assert [r.name for r in plan.phase1_runs()] == [
        "randp_wrn10_1",
        "randp_wrn10_1_dead_leaves",
        "randp_wrn10_1_shaders",
        "randp_wrn10_1_moco",
        "randp_wrn16_1",
    ]
    runs = all_runs(plan)
    assert len(runs) == len(set(runs))
    # CIFAR-100 and DermaMNIST take CIFAR-10's runs in the embedded default: no run of theirs exists
    assert {r.task for r in runs} == {"CIFAR-10"}
    row = table_rows(plan, "table2")[1]
    assert row.label == "DP-RandP" and row.cells["epsilon=1"][0].task == "CIFAR-10"
    main = plan.run("CIFAR-10", plan.main_init, 1.0, 0)
    assert main.path == "private/CIFAR-10/randp_wrn10_1/p4_eps1_seed0"
    assert plan.run("CIFAR-10", None, 8.0, 1, "none").path == "private/CIFAR-10/cold/p0_eps8_seed1"
    assert plan.run("CIFAR-10", plan.main_init, 1.0, 0, "all").phase2_steps == 24


def test_paper_plan_has_the_papers_schedules(configs):
    embedded, paper = configs
    plan = plan_of(paper)
    entry = plan.entry("CIFAR-10", 1.0)
    assert (entry.steps, entry.phase2_steps, entry.lr_phase2, entry.lr_phase3) == (875, 96, 15, 0.4)
    assert plan.entry("DermaMNIST", 7.42).steps == 800
    assert plan.epsilons("CIFAR-100") == [3.0, 4.0, 6.0, 8.0, math.inf]
    settings = private_settings(plan, plan.run("DermaMNIST", plan.main_init, 1.0, 3))
    assert (
        settings.batch_size,
        settings.augmult,
        settings.clip_norm,
        settings.accountant,
        settings.ema_decay,
        settings.momentum,
    ) == (1024, 16, 1.0, "prv", 0.9999, 0.0)
    assert (settings.image_size, settings.padding, settings.micro_batch) == (32, 4, 256)
    assert settings.seed == 3 and settings.model == "wrn16_4"
    assert private_settings(plan, plan.run("CIFAR-10", None, math.inf, 0)).batch_size == 4096
    # Phase I as the paper: its settings' defaults are the paper's values
    from dpvip.plan.dprandp_phase1 import Phase1Settings

    phase1 = Phase1Settings.from_config(paper["dprandp"]["phase1"], "wrn16_4", "align_uniform")
    assert phase1.fingerprint() == Phase1Settings(model="wrn16_4", method="align_uniform").fingerprint()
    # every table has runs for its own task, five seeds each
    assert {r.task for r in needs(plan, "table3")} == {"DermaMNIST"}
    assert all(len(runs) == 5 for row in table_rows(plan, "table1") for runs in row.cells.values())
    assert all(needs(plan, t) for t in TABLES)


def test_bad_config_is_named(configs):
    embedded = configs[0]
    section = copy.deepcopy(embedded["dprandp"])
    section["phase1"]["dataset"] = "nope"
    with pytest.raises(DpvipInputError, match="synthetic dataset 'nope'"):
        plan_of(embedded, section)
    section = copy.deepcopy(embedded["dprandp"])
    section["private"]["tasks"]["CIFAR-100"] = {"runs_of": "DermaMNIST"}
    with pytest.raises(DpvipInputError, match="runs_of 'DermaMNIST'"):
        plan_of(embedded, section)
    section = copy.deepcopy(embedded["dprandp"])
    section["private"]["tasks"]["CIFAR-10"]["schedule"][0]["phase2_steps"] = 99
    with pytest.raises(DpvipInputError, match=r"schedule\[0\].*phase2_steps"):
        plan_of(embedded, section)
    plan = plan_of(embedded)
    with pytest.raises(DpvipInputError, match="no schedule entry for epsilon 3"):
        plan.run("CIFAR-10", None, 3.0, 0)
    assert plan.run("CIFAR-10", None, 1.0, 0).init == COLD


def test_figures_5_and_7_and_the_cost_tables_reuse_existing_runs(configs):
    embedded, paper = configs
    plan = plan_of(embedded)
    assert curve_epsilons(plan) == [1.0, 8.0] and curve_epsilons(plan_of(paper)) == [1.0, math.inf]
    curves = figure_runs(plan, "figure5")
    assert {e: [r.path for r in runs] for e, runs in curves["cold"].items()} == {
        e: [f"private/CIFAR-10/cold/p0_eps{e:g}_seed{s}" for s in plan.seeds] for e in (1.0, 8.0)
    }
    assert {r.phase2_steps for cells in curves.values() for runs in cells.values() for r in runs} == {0}
    assert set(needs(plan, "figure5")) <= set(needs(plan, "figure4"))
    assert set(needs(plan, "figure7")) == {r for r in needs(plan, "table1") if r.warm}  # DP-RandP's runs
    assert set(needs(plan, "table9")) <= set(needs(plan, "figure2")) and needs(plan, "table8") == []
    without = {r for name in (*TABLES, "figure2", "figure4", "figure6", "claims") for r in needs(plan, name)}
    assert set(all_runs(plan)) == without  # no new private run


def test_the_ablations_a_claim_compares_run_their_own_seeds(configs):
    """Tables 10 and 11 (claims g and h) run `claim_seeds` (4 in the embedded default); the
    other ablations keep `seeds` (1)."""
    from dpvip.plan.dprandp_rows import table10_cells, table11_rows, table12_rows

    plan = plan_of(configs[0])
    assert plan.claim_seeds == [0, 1, 2, 3] and plan.ablation_seeds == [0]
    assert {len(runs) for runs in table10_cells(plan).values()} == {4}
    moco = [row for row in table11_rows(plan) if row.label.startswith("MoCo")]
    assert moco and all(len(runs) == 4 for row in moco for runs in row.cells.values())
    wrn16 = [row for row in table12_rows(plan) if "WRN-40-4" in row.label]
    assert wrn16 and all(len(runs) == 1 for row in wrn16 for runs in row.cells.values())
    section = copy.deepcopy(configs[0]["dprandp"])
    del section["ablations"]["claim_seeds"]
    assert plan_of(configs[0], section).claim_seeds == [0]  # default: the ablations' seeds
