"""batch <= n and delta < 1/n checked when planning, for every DP path whose n the config
fixes (the embedded photo crops and digits, CIFAR): DP-RandP, DP fine-tuning, Mehta's heads, the probes."""

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


def refused(call) -> str:
    """The one-line message `call` is refused with."""
    with pytest.raises(DpvipInputError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_dprandp_batch_above_n_and_large_delta_stop_the_plan_naming_the_key_value_and_n():
    config = copy.deepcopy(EMBEDDED)
    assert dprandp_settings(config)  # the embedded default plans
    config["dprandp"]["private"]["tasks"]["CIFAR-10"]["batch_size"] = 3961
    assert refused(lambda: dprandp_settings(config)) == (
        "dprandp.private.tasks.CIFAR-10.batch_size 3961 exceeds n = 3960 training examples "
        "(the photo_crops train split of dprandp.private.tasks.CIFAR-10.data less its validation_fraction)"
    )
    config["dprandp"]["private"]["tasks"]["CIFAR-10"] |= {"batch_size": 3960, "delta": 1 / 3960}
    assert refused(lambda: dprandp_settings(config)) == (
        f"dprandp.private.tasks.CIFAR-10.delta {1 / 3960:g} is not below 1/n for n = 3960 training examples "
        "(the photo_crops train split of dprandp.private.tasks.CIFAR-10.data less its validation_fraction); "
        "lower it, or set privacy.allow_large_delta: true"
    )
    config["privacy"]["allow_large_delta"] = True
    assert dprandp_settings(config)


def test_dprandp_on_cifar_is_checked_against_its_50000_training_images():
    config = copy.deepcopy(EMBEDDED)
    config["dprandp"]["private"]["tasks"]["CIFAR-10"] |= {
        "data": {"source": "cifar10", "root": "/nowhere"},
        "batch_size": 50_001,
    }
    assert refused(lambda: dprandp_settings(config)) == (
        "dprandp.private.tasks.CIFAR-10.batch_size 50001 exceeds n = 50000 training examples "
        "(the cifar10 train split of dprandp.private.tasks.CIFAR-10.data)"
    )


def evaluation_plan(config):
    models = config["pretrain"]["syn_vip"]["models"]
    variants = list(synthetic_variants(config["dp_pretrain"]))
    runs = expand_runs(config["dp_pretrain"], [*models, *variants], 2048, config["privacy"])
    backbones = Backbones(models, runs, "micro", {})
    return EvaluationPlan(config["evaluate"], backbones, config["privacy"])


def test_dp_finetune_batch_and_delta_are_checked_against_the_photo_crops_train_split():
    config = copy.deepcopy(EMBEDDED)
    evaluation_plan(config)
    config["evaluate"]["dp_finetune"]["batch_size"] = 4401
    assert refused(lambda: evaluation_plan(config)) == (
        "evaluate.dp_finetune.batch_size 4401 exceeds n = 4400 training examples "
        "(the photo_crops train split of evaluate.datasets.ImageNet-1K)"
    )
    config["evaluate"]["dp_finetune"] |= {"batch_size": 4400, "delta": 1e-3}
    assert refused(lambda: evaluation_plan(config)) == (
        "evaluate.dp_finetune.delta 0.001 is not below 1/n for n = 4400 training examples "
        "(the photo_crops train split of evaluate.datasets.ImageNet-1K); "
        "lower it, or set privacy.allow_large_delta: true"
    )


def transfer_plan(config):
    return TransferPlan(config["dp_transfer"], config["privacy"])


def test_mehta_heads_check_delta_against_the_training_split_less_the_held_out_share():
    config = copy.deepcopy(EMBEDDED)
    transfer_plan(config)
    assert config["dp_transfer"]["mehta"]["selection"] == {"mode": "validation", "fraction": 0.1, "seed": 0}
    config["dp_transfer"]["mehta"]["delta"] = 1e-3
    assert refused(lambda: transfer_plan(config)) == (
        "dp_transfer.mehta.delta 0.001 is not below 1/n for n = 3960 training examples "
        "(the photo_crops train split of dp_transfer.datasets.photos "
        "less the 440 dp_transfer.mehta.selection holds out; "
        "study mehta_table1); lower it, or set privacy.allow_large_delta: true"
    )
    # 1/4400 < 0.00024 < 1/3960: below 1/n of the 3960 heads train on, not of the whole split
    config["dp_transfer"]["mehta"]["delta"] = 2.4e-4
    transfer_plan(config)
    config["dp_transfer"]["mehta"]["selection"] = {"mode": "test"}  # the whole split trains
    assert refused(lambda: transfer_plan(config)).startswith(
        "dp_transfer.mehta.delta 0.00024 is not below 1/n for n = 4400 training examples "
        "(the photo_crops train split of dp_transfer.datasets.photos; study mehta_table1)"
    )
    config["dp_transfer"]["mehta"]["delta"] = 1e-5
    config["dp_transfer"]["mehta"]["figure1b"]["deltas"] = [1e-5, 0.01]
    assert refused(lambda: transfer_plan(config)) == (
        "dp_transfer.mehta.figure1b.deltas 0.01 is not below 1/n for n = 4400 training examples "
        "(the photo_crops train split of dp_transfer.datasets.photos; study mehta_figure1b); "
        "lower it, or set privacy.allow_large_delta: true"
    )


def test_private_probes_check_delta_against_n():
    config = copy.deepcopy(EMBEDDED)
    config["dp_transfer"]["dprandp_probe"]["cifar"]["delta"] = 0.01
    assert refused(lambda: transfer_plan(config)) == (
        "dp_transfer.dprandp_probe.cifar.delta 0.01 is not below 1/n for n = 4400 training examples "
        "(the photo_crops train split of dp_transfer.datasets.photos; study dprandp_probe_cifar); "
        "lower it, or set privacy.allow_large_delta: true"
    )
    config["privacy"]["allow_large_delta"] = True
    transfer_plan(config)


def test_paper_sets_read_from_folders_are_left_to_their_jobs():
    paper = merged_config("config.yaml", "paper.yaml")
    paper["privacy"]["allow_large_delta"] = False  # ImageNet's delta exceeds 1/n: only the job can count n
    TransferPlan(paper["dp_transfer"], paper["privacy"])
