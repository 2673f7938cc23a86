"""batch <= n and delta < 1/n checked when planning, for every DP path whose n the config
fixes (the embedded digits, CIFAR): DP-RandP, DP fine-tuning, Mehta's heads, the probes."""

from __future__ import annotations

import copy

import pytest
from conftest import merged_config

from dpvip.errors import DpvipInputError
from dpvip.plan.dprandp_private import private_settings
from dpvip.plan.dprandp_rows import all_runs
from dpvip.plan.dprandp_runs import DPRandPPlan
from dpvip.plan.examples import digits_train_examples, planned_examples
from dpvip.plan.transfer import TransferPlan
from dpvip.plan.vip_evaluations import EvaluationPlan
from dpvip.plan.vip_rows import Backbones
from dpvip.plan.vip_runs import expand_runs, synthetic_variants

EMBEDDED = merged_config("config.yaml")


@pytest.mark.parametrize("test_fraction, validation_fraction", [(0.2, 0.0), (0.2, 0.1), (0.25, 0.15), (0.1, 0.33)])
def test_digits_train_size_is_the_jobs_split_without_scikit_learn(test_fraction, validation_fraction):
    from dpvip.data.digits import digits_split

    split = digits_split(test_fraction, 0, validation_fraction)
    train = split["kept"] if validation_fraction else split["train"]
    assert digits_train_examples(test_fraction, validation_fraction) == len(train)


def test_only_sources_whose_entry_fixes_n_are_sized():
    assert planned_examples({"source": "digits"}) == 1437
    assert planned_examples({"source": "digits", "validation_fraction": 0.1}) == 1293
    assert planned_examples({"source": "cifar100", "root": "/nowhere"}) == 50_000
    assert planned_examples({"source": "image_folder", "train": "/x", "test": "/y"}) is None
    assert planned_examples({"source": "medmnist", "path": "/x.npz"}) is None
    assert planned_examples(None) is None


def dprandp_settings(config):
    plan = DPRandPPlan(config["dprandp"], config["synthetic"]["datasets"], config["privacy"])
    return [private_settings(plan, run) for run in all_runs(plan)]


def test_dprandp_batch_above_n_and_large_delta_stop_the_plan_naming_the_task():
    config = copy.deepcopy(EMBEDDED)
    assert dprandp_settings(config)  # the embedded default plans
    config["dprandp"]["private"]["tasks"]["CIFAR-10"]["batch_size"] = 1294
    with pytest.raises(
        DpvipInputError,
        match=r"^dprandp.private.tasks.CIFAR-10 \(epsilon .*\): batch_size 1294 exceeds the 1293 training",
    ):
        dprandp_settings(config)
    config["dprandp"]["private"]["tasks"]["CIFAR-10"] |= {"batch_size": 1293, "delta": 1 / 1293}
    with pytest.raises(
        DpvipInputError, match=r"^dprandp.private.tasks.CIFAR-10 \(epsilon 1\): delta .* is at least 1/n"
    ):
        dprandp_settings(config)
    config["privacy"]["allow_large_delta"] = True
    assert dprandp_settings(config)


def evaluation_plan(config):
    models = config["pretrain"]["syn_vip"]["models"]
    variants = list(synthetic_variants(config["dp_pretrain"]))
    runs = expand_runs(config["dp_pretrain"], [*models, *variants], 2048, config["privacy"])
    backbones = Backbones(models, runs, "micro", {})
    return EvaluationPlan(config["evaluate"], backbones, config["privacy"])


def test_dp_finetune_batch_and_delta_are_checked_against_the_digits_train_split():
    config = copy.deepcopy(EMBEDDED)
    evaluation_plan(config)
    config["evaluate"]["dp_finetune"]["batch_size"] = 1438
    with pytest.raises(DpvipInputError, match="^evaluate.dp_finetune on ImageNet-1K: batch_size 1438 exceeds the 1437"):
        evaluation_plan(config)
    config["evaluate"]["dp_finetune"] |= {"batch_size": 1437, "delta": 1e-3}
    with pytest.raises(DpvipInputError, match="delta 0.001 is at least 1/n for this run's n = 1437"):
        evaluation_plan(config)


def test_mehta_heads_and_probes_check_delta_against_n():
    config = copy.deepcopy(EMBEDDED)
    TransferPlan(config["dp_transfer"], config["privacy"])
    mehta = copy.deepcopy(config)
    mehta["dp_transfer"]["mehta"]["delta"] = 1e-3
    with pytest.raises(
        DpvipInputError, match=r"^dp_transfer mehta_table1 run .* on digits: delta 0.001 is at least 1/n"
    ):
        TransferPlan(mehta["dp_transfer"], mehta["privacy"])
    probe = copy.deepcopy(config)
    probe["dp_transfer"]["dprandp_probe"]["cifar"]["delta"] = 0.01
    with pytest.raises(DpvipInputError, match=r"^dp_transfer dprandp_probe_cifar run .*: delta 0.01 is at least 1/n"):
        TransferPlan(probe["dp_transfer"], probe["privacy"])
    probe["privacy"]["allow_large_delta"] = True
    TransferPlan(probe["dp_transfer"], probe["privacy"])


def test_paper_sets_read_from_folders_are_left_to_their_jobs():
    paper = merged_config("config.yaml", "paper.yaml")
    paper["privacy"]["allow_large_delta"] = False  # ImageNet's delta exceeds 1/n: only the job can count n
    TransferPlan(paper["dp_transfer"], paper["privacy"])
