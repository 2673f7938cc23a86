"""A job's budget is its per-step (per-example) FLOPs times the steps its plan gives it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dpvip.budget import DP_STEP_TIME_RATIOS, networks
from dpvip.budget.datasets import DatasetSizes
from dpvip.budget.estimates import estimate
from dpvip.budget.job_budget import CPU, Facts
from dpvip.budget.workflow import WorkflowJob
from dpvip.errors import DpvipInputError
from dpvip.models import MAESettings
from dpvip.plan.dprandp_private import PrivateSettings
from dpvip.plan.dprandp_runs import PrivateRun

SMALL_MAE = {"image_size": 16, "patch_size": 4}


def job(rule: str, params: dict, gpu: int = 1, **wildcards) -> WorkflowJob:
    return WorkflowJob(rule, wildcards, params, {"gpu": gpu}, None)


def facts(names: dict | None = None, sizes: dict | None = None) -> Facts:
    return Facts(names or {}, DatasetSizes(sizes or {}))


def test_dp_mae_is_steps_times_expected_batch_times_a_clipped_example():
    settings = SMALL_MAE | {"steps": 3, "batch_size": 10, "micro_batch": 5}
    budget = estimate(job("dp_mae", {"settings": settings, "model": "pico"}), facts())
    per_example = networks.mae_dp_pretraining(MAESettings("pico", 16, 4)).train
    assert budget.job_type == "dp_mae"
    assert (budget.steps, budget.examples_per_step, budget.train_flops_per_example) == (3, 10, per_example)
    assert budget.flops == 3 * 10 * per_example
    assert budget.flops_of("step") == 10 * per_example
    # its GPU time: the non-private step's FLOPs times the DP step's measured time ratio
    nonprivate = networks.mae_pretraining(MAESettings("pico", 16, 4)).train
    assert budget.timed_flops == pytest.approx(3 * 10 * nonprivate * DP_STEP_TIME_RATIOS["dp_mae"])
    assert budget.timed_of("step") == pytest.approx(10 * nonprivate * DP_STEP_TIME_RATIOS["dp_mae"])


def test_syn_vip_steps_are_epochs_times_full_batches_of_the_dataset():
    section = SMALL_MAE | {"dataset": "shaders", "epochs": 2, "batch_size": 8, "warmup_epochs": 1}
    names = {"SYNTHETIC_SPECS": {"shaders": SimpleNamespace(images=20)}}  # 2 full batches an epoch
    budget = estimate(job("syn_vip", {"settings": section, "size": "pico"}), facts(names))
    per_example = networks.mae_pretraining(MAESettings("pico", 16, 4)).train
    assert budget.steps == 4
    assert budget.flops == 4 * 8 * per_example
    assert budget.flops_of("epoch") == 2 * 8 * per_example


def test_dprandp_private_counts_both_phases_and_the_final_evaluation():
    settings = PrivateSettings(
        model="wrn10_1", epsilon=1.0, steps=5, phase2_steps=2, lr_phase2=1.0, lr_phase3=1.0, batch_size=4,
        augmult=2, image_size=8, padding=2,
    )  # fmt: skip
    run = PrivateRun("CIFAR-10", "randp_wrn10_1", "wrn10_1", 2, 1.0, 0)
    params = {"settings": settings, "run": run, "data": {"source": "cifar10"}}
    sizes = {"CIFAR-10": {"train": 100, "test": 7, "classes": 10}}
    budget = estimate(job("dprandp_private", params), facts(sizes=sizes))
    head = networks.wrn_private("wrn10_1", 10, 8, 2, head_only=True)
    whole = networks.wrn_private("wrn10_1", 10, 8, 2, head_only=False)
    expected = {"phase2": 2 * 4 * head.train, "phase3": 3 * 4 * whole.train, "evaluation": 7 * whole.forward}
    assert budget.parts == expected
    assert budget.flops == sum(budget.parts.values())
    # timed: both phases without clipping, times the measured ratio; the evaluation as counted
    plain = [networks.wrn_private("wrn10_1", 10, 8, 2, head_only=h, private=False).train for h in (True, False)]
    training = (2 * plain[0] + 3 * plain[1]) * 4 * DP_STEP_TIME_RATIOS["dprandp_private"]
    assert budget.timed_flops == pytest.approx(training + 7 * whole.forward)


def test_cpu_jobs_have_no_gpu_flops_and_unknown_gpu_rules_say_so():
    cpu = estimate(WorkflowJob("synthetic_shard", {}, {}, {}, None), facts())
    assert (cpu.job_type, cpu.flops, cpu.unmodelled) == (CPU, 0, None)
    new = estimate(job("some_new_gpu_rule", {}), facts())
    assert new.flops == 0 and new.unmodelled == "no FLOP model for rule some_new_gpu_rule"


def test_dataset_sizes_match_names_and_sources_and_refuse_unknown_sets():
    sizes = DatasetSizes({"ImageNet-1K": {"train": 10, "test": 2, "classes": 3}})
    assert sizes.of("imagenet_1k").train == 10
    assert sizes.of("whatever", {"source": "ImageNet-1K", "validation_fraction": 0.5}).train == 5
    with pytest.raises(DpvipInputError, match="dataset 'Places' has no size"):
        sizes.of("Places")
