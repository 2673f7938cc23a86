"""The evaluation plan: exactly the jobs the ViP tables and figures need, named by what they
measure, with config mistakes refused before any job."""

from __future__ import annotations

import pytest

from dpvip.errors import DpvipInputError
from dpvip.plan.vip_evaluations import Evaluation, EvaluationPlan, all_evaluations
from dpvip.plan.vip_rows import VIP_TABLES, Backbones, table_rows
from dpvip.plan.vip_runs import expand_runs

SETTINGS = {"image_size": 32, "patch_size": 4, "steps": 24, "batch_size": 256, "warmup_steps": 4}
ABLATIONS = {
    "dataset_size": [1024],
    "random_init": ["micro"],
    "model_size": ["pico"],
    "batch_size": [64],
    "decoder_depth": [1],
    "epsilon": [{"epsilon": 2.0, "steps": 6}],
}
SECTION = {
    "image_size": 32,
    "datasets": {"ImageNet-1K": {"source": "digits"}, "CIFAR-100": {"source": "digits"}},
    "linear_probe": {"datasets": ["ImageNet-1K"]},
    "few_shot": {"datasets": {"CIFAR-100": [10]}},
    "coco": {"source": "standin"},
    "ade20k": {"source": "standin"},
    "dp_finetune": {"dataset": "ImageNet-1K"},
}


@pytest.fixture
def backbones() -> Backbones:
    section = {"dataset": "laion", "models": ["micro"], "settings": SETTINGS, "ablations": ABLATIONS}
    runs = expand_runs(section, ["micro", "pico"], 4096)
    return Backbones(["micro", "pico"], runs, "micro", {"AlexNet": "alexnet"})


COLUMNS = {
    "vip_table1": ["# pre-train samples", "ImageNet-1K", "Places-365"],
    "vip_table2": ["Aircraft 10-shot", "CIFAR-100 5-shot", "CIFAR-100 10-shot"],
    "vip_table4": ["COCO AP box", "COCO AP mask", "ADE20K mIoU"],
    "vip_table5": ["epsilon", "delta", "Top-1 Accuracy", "Top-1 Accuracy std"],
    "vip_table6": ["ImageNet-1K"],
    "vip_table7": ["CIFAR-100 10-shot"],
    "vip_table8": ["epsilon = 2.0", "epsilon = 4.0", "epsilon = 8.0", "epsilon = +inf"],
    "vip_table9": ["# parameters", "ImageNet-1K"],
    "vip_table10": ["Batch Size", "# Train data", "Noise sigma", "ImageNet-1K", "CIFAR-100 10-shot"],
    "vip_table11": ["decoder depth", "masking ratio", "ImageNet-1K"],
}


def test_each_table_asks_for_the_evaluations_of_its_cells(backbones):
    plan = EvaluationPlan(SECTION, backbones)
    assert plan.table_evaluations("vip_table1", COLUMNS["vip_table1"]) == [
        Evaluation("linear_probe", "syn_vip_micro", "ImageNet-1K"),
        Evaluation("linear_probe", "vip_micro", "ImageNet-1K"),
    ]  # Places-365 is not configured; '# pre-train samples' is not measured
    assert plan.table_evaluations("vip_table2", COLUMNS["vip_table2"]) == [
        Evaluation("few_shot", "cnn_alexnet", "CIFAR-100", 10),
        Evaluation("few_shot", "syn_vip_micro", "CIFAR-100", 10),
        Evaluation("few_shot", "vip_micro", "CIFAR-100", 10),
    ]
    assert {e.task for e in plan.table_evaluations("vip_table4", COLUMNS["vip_table4"])} == {"coco", "ade20k"}
    assert plan.table_evaluations("vip_table5", COLUMNS["vip_table5"]) == [
        Evaluation("dp_finetune", "syn_vip_micro", "ImageNet-1K"),
        Evaluation("dp_finetune", "vip_micro", "ImageNet-1K"),
    ]
    assert [e.backbone for e in plan.table_evaluations("vip_table8", COLUMNS["vip_table8"])] == [
        "vip_micro",
        "vip_micro_eps2",
    ]
    assert [e.backbone for e in plan.table_evaluations("vip_table11", COLUMNS["vip_table11"])] == [
        "vip_micro",
        "vip_micro_dec1",
    ]


def test_evaluations_are_shared_between_tables_and_paths_name_them(backbones):
    needs = all_evaluations(EvaluationPlan(SECTION, backbones), COLUMNS)
    assert set(needs) == {*VIP_TABLES, "vip_figure1", "vip_figure5", "vip_claims"}
    assert needs["vip_claims"] == []  # no repeats
    unique = {e.path for evaluations in needs.values() for e in evaluations}
    assert "linear_probe/vip_micro/ImageNet-1K" in unique and "few_shot/vip_micro_b64/CIFAR-100_10shot" in unique
    assert "coco/vip_micro" in unique and "dp_finetune/vip_micro/ImageNet-1K" in unique
    # Figure 5: probe and first few-shot setting of each model size, both initialisations
    assert {e.backbone for e in needs["vip_figure5"]} == {"vip_micro", "vip_pico", "vip_micro_random"}
    assert {e.task for e in needs["vip_figure5"]} == {"linear_probe", "few_shot"}
    # Figure 1: the largest main-recipe ViP (micro, wider than pico) and COCO of the main ViP
    assert {e.path for e in needs["vip_figure1"]} == {"linear_probe/vip_micro/ImageNet-1K", "coco/vip_micro"}


def test_table_rows_name_the_paper_rows_they_reproduce(backbones):
    labels = lambda table, **kw: [row.label for row in table_rows(table, COLUMNS[table], backbones, **kw)]  # noqa: E731
    assert labels("vip_table9") == ["(Syn)-ViP-micro", "(Syn)-ViP-pico", "ViP-micro", "ViP-pico"]
    assert labels("vip_table10", examples={"vip_micro": 233_000_000, "vip_micro_n1024": 1024}) == [
        "(Syn)-ViP",
        "ViP / data 1024",
        "ViP / data 233M",
        "ViP / batch 64",
        "ViP / batch 256",
    ]
    (row,) = table_rows("vip_table8", COLUMNS["vip_table8"], backbones)
    assert row.cells == {
        "epsilon = 2.0": ("vip_micro_eps2", "ImageNet-1K"),
        "epsilon = 8.0": ("vip_micro", "ImageNet-1K"),
    }


def test_a_task_using_an_undefined_dataset_is_refused_by_name(backbones):
    section = SECTION | {"few_shot": {"datasets": {"Aircraft": [10]}}}
    with pytest.raises(
        DpvipInputError, match="evaluate.few_shot uses dataset 'Aircraft', which evaluate.datasets does not define"
    ):
        EvaluationPlan(section, backbones)


def test_a_job_sees_only_its_part_of_the_config(backbones):
    plan = EvaluationPlan(SECTION, backbones)
    part = plan.job_section(Evaluation("linear_probe", "vip_micro", "ImageNet-1K"))
    assert part == {
        "image_size": 32,
        "datasets": {"ImageNet-1K": {"source": "digits"}},
        "linear_probe": {"datasets": ["ImageNet-1K"]},
    }


def test_a_tasks_backbones_limit_its_jobs_and_leave_the_other_cells_empty(backbones):
    section = SECTION | {"coco": {"source": "standin", "backbones": ["vip_micro"]}}
    plan = EvaluationPlan(section, backbones)
    table4 = plan.table_evaluations("vip_table4", COLUMNS["vip_table4"])
    assert [e.path for e in table4 if e.task == "coco"] == ["coco/vip_micro"]  # not coco/syn_vip_micro
    assert {e.backbone for e in table4 if e.task == "ade20k"} == {"syn_vip_micro", "vip_micro"}  # unlisted: all
    assert plan.evaluation("syn_vip_micro", "COCO AP box") is None
    # not a setting of the job: listing backbones does not change a job's config
    assert plan.job_section(Evaluation("coco", "vip_micro")) == EvaluationPlan(SECTION, backbones).job_section(
        Evaluation("coco", "vip_micro")
    )


def test_an_unknown_backbone_in_a_tasks_list_is_refused_by_name(backbones):
    section = SECTION | {"dp_finetune": {"dataset": "ImageNet-1K", "backbones": ["vip_huge"]}}
    with pytest.raises(DpvipInputError, match="evaluate.dp_finetune.backbones names 'vip_huge', which is not a model"):
        EvaluationPlan(section, backbones)


def test_repeats_are_evaluated_for_what_the_claims_compare():
    """Every repeat gets the first probe; the main ViP's repeats also the fewest shots, DP
    fine-tuning and COCO and ADE20K (claims b, k and y); the repeats of the runs the few-shot
    claims compare with the main ViP (less data, a smaller batch, a smaller model: ae, af,
    ai) the fewest shots. The tables and figures keep evaluating the first runs."""
    section = {"dataset": "laion", "models": ["micro"], "settings": SETTINGS, "ablations": ABLATIONS}
    runs = expand_runs(section | {"repeats": 3}, ["micro", "pico"], 4096)
    plan = EvaluationPlan(SECTION, Backbones(["micro", "pico"], runs, "micro"))
    needs = all_evaluations(plan, COLUMNS)
    repeats = {e.path for e in needs["vip_claims"]}
    assert {"few_shot/vip_micro_r2/CIFAR-100_10shot", "dp_finetune/vip_micro_r1/ImageNet-1K"} <= repeats
    assert {"coco/vip_micro_r1", "coco/vip_micro_r2", "ade20k/vip_micro_r1", "ade20k/vip_micro_r2"} <= repeats
    assert "linear_probe/vip_micro_b64_r1/ImageNet-1K" in repeats
    few_shot = {
        f"few_shot/{run}_r{k}/CIFAR-100_10shot"
        for run in ("vip_micro_n1024", "vip_micro_b64", "vip_pico")
        for k in (1, 2)
    }
    assert few_shot <= repeats
    main_only = ("few_shot/vip_micro_dec1_r", "coco/vip_micro_b64", "ade20k/vip_pico", "dp_finetune/vip_pico")
    assert not any(path.startswith(main_only) for path in repeats)
    # a probe per repeat, plus 2 x (shots, top-1, COCO, ADE20K) of the main, 2 x shots of 3 more
    assert len(repeats) == 2 * (len(runs) // 3) + 8 + 6
    # each repeat's dense fine-tune draws its own data order and heads: its spread holds that noise
    seeds = [
        plan.job_section(Evaluation("ade20k", b))["ade20k"].get("seed", 0)
        for b in ("vip_micro", "vip_micro_r1", "vip_micro_r2")
    ]
    assert seeds == [0, 1, 2] and plan.job_section(Evaluation("coco", "vip_micro_r2"))["coco"]["seed"] == 2
    tables = {e.backbone for table in VIP_TABLES for e in needs[table]}
    assert not any(backbone.endswith(("_r1", "_r2")) for backbone in tables)


def test_the_detectron2_backends_refusals_come_at_plan_time(backbones):
    """Both were refused only once the job had started: several processes (it starts its
    own), and an encoder of patch size 4 (ViTDet's pyramid needs 16)."""
    from dpvip.plan.vip_evaluations import check_detectron2

    coco = {"source": "standin", "backend": "detectron2", "detectron2": {"gpus": 8}}
    evaluations = [Evaluation("coco", "vip_micro"), Evaluation("linear_probe", "vip_pico", "ImageNet-1K")]
    with pytest.raises(DpvipInputError, match="evaluate.coco.processes is 8: backend detectron2 starts its own"):
        check_detectron2({"coco": coco | {"processes": 8}}, evaluations, {"vip_micro": 16})
    with pytest.raises(DpvipInputError, match="needs encoders of patch size 16 .* vip_micro has patch size 4"):
        check_detectron2({"coco": coco}, evaluations, {"vip_micro": 4, "vip_pico": 4})
    check_detectron2({"coco": coco}, evaluations, {"vip_micro": 16, "vip_pico": 4})  # pico is probed, not detected
    check_detectron2({"coco": {"backend": "torchvision", "processes": 8}}, evaluations, {"vip_micro": 4})


def test_the_detectron2_jobs_params_hold_only_what_it_reads(backbones):
    """Its config file sets the schedule, sizes and learning rate: changing the torchvision
    backend's settings must not rerun a detectron2 job."""
    coco = {"source": "standin", "backend": "detectron2", "detectron2": {"gpus": 1}, "score_threshold": 0.05}
    section = SECTION | {"coco": coco | {"iterations": 40, "batch_size": 8, "image_size": 64, "lr": 1e-3}}
    part = EvaluationPlan(section, backbones).job_section(Evaluation("coco", "vip_micro"))
    assert part["coco"] == coco


def test_only_the_runs_the_few_shot_claims_compare_have_their_repeats_few_shot_tuned():
    """With two points per ablation, the smallest dataset and batch (ae, af) and the smallest
    and largest model of the synthetic-init line (ai) are compared; the others are not."""
    ablations = ABLATIONS | {"dataset_size": [1024, 2048], "batch_size": [64, 128], "model_size": ["pico", "nano"]}
    section = {"dataset": "laion", "models": ["micro"], "settings": SETTINGS, "ablations": ablations}
    runs = expand_runs(section | {"repeats": 2}, ["micro", "pico", "nano"], 4096)
    plan = EvaluationPlan(SECTION, Backbones(["micro", "pico", "nano"], runs, "micro"))
    # the model line by encoder parameters: pico < micro < nano (the CPU sizes lie below nano)
    assert plan.few_shot_claim_runs() == {"vip_micro_n1024", "vip_micro_b64", "vip_pico", "vip_nano"}
    tuned = {e.backbone for e in plan.repeat_evaluations() if e.task == "few_shot"}
    assert tuned == {"vip_micro_n1024_r1", "vip_micro_b64_r1", "vip_pico_r1", "vip_nano_r1", "vip_micro_r1"}
