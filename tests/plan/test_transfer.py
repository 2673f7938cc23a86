"""The DP transfer plan: which caches and runs each Mehta et al. / DP-RandP probing study
holds, and one-line errors for a config that names what does not exist."""

from __future__ import annotations

import copy

import pytest
from conftest import merged_config

from dpvip.errors import DpvipInputError
from dpvip.plan.transfer import STUDIES, TransferPlan
from dpvip.plan.transfer_runs import PRIVATE, FeatureSet

EMBEDDED = merged_config("config.yaml")["dp_transfer"]
PAPER = merged_config("config.yaml", "paper.yaml")["dp_transfer"]


def test_feature_set_paths_name_backbone_dataset_recipe_crop_size_and_views():
    assert FeatureSet("vit", "digits", "prelogits", 32).path == "vit/digits/prelogits_center32"
    assert FeatureSet("vit", "digits", "prelogits", 32, "inception", 10).path == "vit/digits/prelogits_inception32_x10"


def test_every_study_has_runs_and_run_keys_are_unique_within_it():
    plan = TransferPlan(EMBEDDED)
    for study in STUDIES:
        runs = plan.runs(study)
        assert runs, study
        assert len({run.key for run in runs}) == len(runs), study


def test_batch_sweeps_cover_every_batch_with_and_without_privacy_for_the_epochs():
    plan = TransferPlan(EMBEDDED)
    runs = plan.runs("mehta_table1")
    columns = {run.column for run in runs}
    assert columns == {
        f"{side} / batch={b}" for side in ("With privacy", "Without privacy") for b in EMBEDDED["mehta"]["batch_sizes"]
    }
    assert {run.settings["optimizer"] for run in runs} == {"sgd"}
    private = [run for run in runs if run.column.startswith(PRIVATE)]
    assert {run.settings["epsilon"] for run in private} == {10}
    epochs = EMBEDDED["mehta"]["epochs"]
    assert all(
        run.settings["epochs"] == epochs and run.features.crop == "inception" and run.features.views == epochs
        for run in runs
    )
    assert {run.row for run in runs} == {"ViT-B/16 / Last layer", "ResNet50x4 / Last layer"}
    table2 = plan.runs("mehta_table2")
    assert {run.settings["optimizer"] for run in table2} == {"lamb", "sgd"}  # sgd: the 'Best' column
    assert any(run.column == "Without privacy / Best" for run in table2)


def test_single_step_runs_are_one_full_batch_step_accounted_exactly():
    plan = TransferPlan(EMBEDDED)
    for study in ("mehta_table5", "mehta_figure1b", "mehta_figure2"):
        for run in plan.runs(study):
            if run.row.startswith("(a)"):  # Figure 2a: where the learning rate matters
                assert run.settings["epsilon"] is None and run.settings["batch_fraction"] < 1
                continue
            assert run.settings["batch_fraction"] == 1.0 and run.settings["epochs"] == 1, study
            assert run.settings["accountant"] == "prv"  # q = 1: the exact Gaussian mechanism
            assert run.features.crop == "center"
    figure1b = plan.runs("mehta_figure1b")
    assert {run.settings["delta"] for run in figure1b if run.settings["epsilon"]} == {1e-6, 8e-7}
    assert {run.settings["epsilon"] for run in figure1b} - {None} == {0.25, 0.5, 1, 2, 4, 8, 10}


def test_table4_changes_one_thing_at_a_time_from_its_base():
    plan = TransferPlan(EMBEDDED)
    runs = {(run.row, run.settings["lr"], run.settings["seed"]): run for run in plan.runs("mehta_table4")}
    lr = EMBEDDED["mehta"]["lrs"]["lamb"][0]
    base = runs[("No change", lr, 0)]
    differences = {}
    for (row, run_lr, seed), run in runs.items():
        if run_lr == lr and seed == 0 and row != "No change":
            changed = {k for k in run.settings if run.settings[k] != base.settings.get(k)}
            changed |= {"features"} if run.features != base.features else set()
            differences[row] = changed
    assert differences["Zero Init -> Lecun Normal Init"] == {"init_scale"}
    assert differences["Inception Crop -> Center Crop"] == {"features"}
    assert differences["10 epochs -> 1 epochs"] == {"epochs"}
    assert differences["Clip at 1 -> 10"] == {"clip_norm"}
    assert differences["Resolution 384 -> 512"] == {"features"}
    assert "optimizer" in differences["DP-LAMB -> DP-Adam"]


def test_probe_studies_follow_the_schedule_with_seeds():
    plan = TransferPlan(EMBEDDED)
    cifar = plan.runs("dprandp_probe_cifar")
    assert {run.features.recipe for run in cifar} == {"projection1"}
    assert len(cifar) == len(EMBEDDED["dprandp_probe"]["cifar"]["schedule"]) * len(
        EMBEDDED["dprandp_probe"]["cifar"]["seeds"]
    )
    imagenet = plan.runs("dprandp_probe_imagenet")
    assert {run.settings["feature_norm"] for run in imagenet} == {50}
    assert {run.settings["steps"] for run in imagenet} == {100, 200}
    assert {run.features.recipe for run in imagenet} == {"blocks4"}


def test_paper_config_drops_the_embedded_backbones_and_uses_paper_settings():
    plan = TransferPlan(PAPER)
    assert set(plan.backbones) == {"syn_vip_base", "vip_base", "wrn"}
    assert "digits" not in plan.datasets
    assert plan.mehta["models"] == {"ViT-B/16": "syn_vip_base"}
    runs = plan.runs("mehta_table1")
    assert {run.features.image_size for run in runs} == {384}
    assert len({run.settings["seed"] for run in runs}) == 5
    sizes = {f.image_size for f in plan.feature_sets().values() if f.backbone == "vip_base"}
    assert {256, 384, 512} <= sizes


@pytest.mark.parametrize(
    "path, value, message",
    [
        (("mehta", "main"), "nope", "backbone 'nope'"),
        (("dprandp_probe", "cifar", "dataset"), "cifar9", "dataset 'cifar9'"),
        (("backbones", "wrn", "from"), "elsewhere", "from 'elsewhere'"),
    ],
)
def test_unknown_names_give_one_line_errors(path, value, message):
    section = copy.deepcopy(EMBEDDED)
    target = section
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(DpvipInputError, match=message) as err:
        TransferPlan(section)
    assert "\n" not in str(err.value)
    with pytest.raises(DpvipInputError, match="no DP transfer study"):
        TransferPlan(EMBEDDED).runs("mehta_table9")


def with_selection(section: dict, **selection) -> dict:
    section = copy.deepcopy(section)
    section["mehta"]["selection"] = selection
    return section


def test_head_runs_hold_out_a_uniform_validation_share_by_default_and_test_mode_holds_out_none():
    plan, paper_practice = TransferPlan(EMBEDDED), TransferPlan(with_selection(EMBEDDED, mode="test"))
    for study in STUDIES:
        heads = [run for run in plan.runs(study) if run.kind == "head"]
        assert all(run.settings["validation"] == {"fraction": 0.1, "seed": 0, "stratified": False} for run in heads)
        assert not any("validation" in run.settings for run in paper_practice.runs(study))
        assert all("validation" not in run.settings for run in plan.runs(study) if run.kind == "probe")
    record = plan.selection_record("mehta_table1")
    assert record["mode"] == "validation" and not record["stratified"]
    assert "held out of the private set" in record["privacy"] and "composition" in record["privacy"]
    tested = paper_practice.selection_record("mehta_table1")
    assert tested["mode"] == "test" and "optimistic" in tested["label"] and "optimistic" in tested["privacy"]
    assert plan.selection_record("dprandp_probe_cifar") is None  # one learning rate per cell: no pick


def test_planned_sizes_count_the_examples_left_after_the_validation_cut():
    """delta < 1/n for n the examples a head trains on: the photo crops' 4,400 train less 440 held out."""
    section = copy.deepcopy(EMBEDDED)
    section["mehta"]["delta"] = 1 / 4000  # above 1/4400, below 1/3960
    TransferPlan(section)
    with pytest.raises(DpvipInputError, match="delta"):
        TransferPlan(with_selection(section, mode="test"))


def test_a_study_job_gets_a_digest_of_its_runs_and_rebuilds_them_from_the_config():
    """The runs' repr (tens of KB) made Snakemake's "params have changed" line unreadable: the
    param is their SHA-256, and the job rebuilds the runs and checks them against it."""

    from dpvip.transfer.jobs import study_runs

    config = merged_config("config.yaml")
    plan = TransferPlan(config["dp_transfer"], config["privacy"])
    digest = plan.runs_digest("mehta_table5")
    assert len(digest) == 64 and len(repr(plan.runs("mehta_table5"))) > 10_000
    assert study_runs(config, "mehta_table5", digest) == plan.runs("mehta_table5")
    assert plan.runs_digest("mehta_table4") != digest
    with pytest.raises(DpvipInputError, match="not those its job was planned with"):
        study_runs(config, "mehta_table5", plan.runs_digest("mehta_table4"))


def test_a_feature_size_the_patches_do_not_tile_is_refused_at_plan_time():
    """image_size 30 with patch 4 was accepted, and the encoder saw another grid."""
    config = merged_config("config.yaml")
    plan = TransferPlan(config["dp_transfer"], config["privacy"])
    plan.check_patch_sizes({"syn_vip": 4, "dp_pretrain": 4})  # the embedded sizes: 16, 24, 32, 40
    config["dp_transfer"]["backbones"]["syn_vip_micro"]["image_size"] = 30
    config["dp_transfer"]["mehta"]["single_step_image_size"] = 30
    with pytest.raises(DpvipInputError, match=r"syn_vip_micro at image size 30: not a multiple of its patch size 4"):
        TransferPlan(config["dp_transfer"], config["privacy"]).check_patch_sizes({"syn_vip": 4, "dp_pretrain": 4})
