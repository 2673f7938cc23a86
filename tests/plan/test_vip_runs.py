"""The DP runs a config asks for: main runs and ViP's ablations, named, deduplicated and
checked before any job; and the runs each loss figure compares."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dpvip.errors import DpvipInputError
from dpvip.plan.pretrain import shortened
from dpvip.plan.vip_runs import REPEAT, repeats_of, expand_runs, figure_runs, synthetic_variants
from conftest import merged_config

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {"image_size": 32, "patch_size": 4, "steps": 24, "batch_size": 512, "warmup_steps": 4}


def section(**changes) -> dict:
    return {"dataset": "laion", "models": ["micro"], "settings": SETTINGS} | changes


def test_every_ablation_becomes_a_named_run():
    ablations = {
        "dataset_size": [2048, 4096, 8192],  # 8192: the whole dataset, i.e. the main run
        "random_init": ["micro"],
        "model_size": ["micro", "mini"],
        "batch_size": [128, 512],  # 512: the main run's
        "decoder_depth": [1, 2],  # 2: micro's own
        "mask_ratio": [0.5, 0.75],  # 0.75: the default
        "epsilon": [{"epsilon": 2.0, "steps": 6}, {"epsilon": 8.0, "steps": 24}],  # 8: the main run's
    }
    runs = expand_runs(section(ablations=ablations), ["micro", "mini"], 8192)
    assert sorted(runs) == sorted(
        [
            "vip_micro",
            "vip_mini",
            "vip_micro_random",
            "vip_micro_n2048",
            "vip_micro_n4096",
            "vip_micro_b128",
            "vip_micro_dec1",
            "vip_micro_mask50",
            "vip_micro_eps2",
        ]
    )
    assert runs["vip_micro_random"].init is None and runs["vip_mini"].init == "mini"
    assert runs["vip_micro_dec1"].model == "micro_dec1" and runs["vip_micro_dec1"].init == "micro"
    assert runs["vip_micro_n2048"].values["examples"] == 2048
    assert runs["vip_micro_mask50"].values["mask_ratio"] == 0.5
    run_options = {"randomness": "secret", "allow_large_delta": False}  # privacy's defaults, in every run
    assert runs["vip_micro_eps2"].values == SETTINGS | run_options | {"epsilon": 2.0, "steps": 6, "warmup_steps": 4}


def test_batch_ablation_keeps_the_number_of_per_example_gradients():
    runs = expand_runs(section(ablations={"batch_size": [128, 256]}), ["micro"], 8192)
    for name, batch in (("vip_micro_b128", 128), ("vip_micro_b256", 256)):
        values = runs[name].values
        assert values["batch_size"] * values["steps"] == 512 * 24
        assert values["warmup_steps"] == round(4 * values["steps"] / 24)


def test_the_paper_config_expands_to_vip_s_runs():
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    syn_vip = [*paper["pretrain"]["syn_vip"]["models"], *synthetic_variants(paper["dp_pretrain"])]
    runs = expand_runs(paper["dp_pretrain"], syn_vip, 233_000_000)
    assert runs["vip_base"].values["batch_size"] == 98304 and runs["vip_base"].values["steps"] == 6100
    assert runs["vip_base_b8192"].values["steps"] == 73200 and runs["vip_base_b32768"].values["steps"] == 18300
    assert {"vip_base_n2000000", "vip_base_n23000000", "vip_base_dec1", "vip_base_dec8", "vip_base_mask25"} <= set(runs)
    assert {f"vip_{m}_random" for m in ("nano", "tiny", "small", "base", "large")} <= set(runs)
    assert (runs["vip_base_eps2"].values["steps"], runs["vip_base_eps4"].values["steps"]) == (1500, 3000)
    figures = figure_runs(paper["dp_pretrain"], runs, 233_000_000)
    assert figures["vip_figure3a"] == ["vip_base_n2000000", "vip_base_n23000000", "vip_base"]
    assert figures["vip_figure4b"] == ["vip_base_b8192", "vip_base_b32768", "vip_base"]
    assert figures["vip_figure4a"] == [f"vip_{m}" for m in ("base", "nano", "tiny", "small", "large")]
    assert figures["vip_figure3b"] == ["vip_base", "vip_base_syn_e20", "vip_base_random"]
    assert runs["vip_base_syn_e20"].init == "base_e20"  # a (Syn)-ViP-Base of 20 epochs


def test_a_shorter_synthetic_pretraining_is_its_own_syn_vip_run():
    """Figure 3b's ablation: the ablation model from a (Syn)-ViP of fewer epochs, with the
    same share of warm-up; its (Syn)-ViP run must exist before the DP run is accepted."""
    dp = section(ablations={"synthetic_epochs": [2]})
    assert synthetic_variants(dp) == {"micro_e2": ("micro", 2)}
    runs = expand_runs(dp, ["micro", "micro_e2"], 8192)
    assert runs["vip_micro_syn_e2"].init == "micro_e2" and runs["vip_micro_syn_e2"].model == "micro"
    assert runs["vip_micro_syn_e2"].values == runs["vip_micro"].values  # only the start differs
    assert figure_runs(dp, runs, 8192)["vip_figure3b"] == ["vip_micro", "vip_micro_syn_e2"]
    assert shortened({"epochs": 8, "warmup_epochs": 1, "blr": 1e-3}, 2) == {
        "epochs": 2,
        "warmup_epochs": 0.25,
        "blr": 1e-3,
    }
    with pytest.raises(DpvipInputError, match="micro_e2"):
        expand_runs(dp, ["micro"], 8192)


def test_a_run_from_a_syn_vip_model_that_is_not_trained_is_refused():
    with pytest.raises(
        DpvipInputError, match="vip_mini starts from \\(Syn\\)-ViP 'mini', which pretrain.syn_vip.models does not train"
    ):
        expand_runs(section(ablations={"model_size": ["mini"]}), ["micro"], 8192)


def test_a_run_whose_batch_exceeds_its_examples_is_refused_by_name():
    with pytest.raises(
        DpvipInputError, match="dp_pretrain run vip_micro_n256: batch_size 512 exceeds the 256 examples"
    ):
        expand_runs(section(ablations={"dataset_size": [256]}), ["micro"], 8192)


def test_every_run_takes_the_privacy_sections_run_options():
    privacy = {"randomness": "seeded", "allow_large_delta": True}
    runs = expand_runs(section(ablations={"epsilon": [{"epsilon": 2.0, "steps": 6}]}), ["micro"], 8192, privacy)
    assert len(runs) == 2
    assert all(run.values["randomness"] == "seeded" and run.values["allow_large_delta"] for run in runs.values())
    with pytest.raises(DpvipInputError, match="privacy.randomness 'open'"):
        expand_runs(section(), ["micro"], 8192, {"randomness": "open"})
    # a delta of at least 1/n stops the plan, naming the run, unless allowed
    large = section(settings=SETTINGS | {"delta": 1e-3})
    with pytest.raises(DpvipInputError, match=r"dp_pretrain run vip_micro: delta 0.001 is at least 1/n .*n = 8192"):
        expand_runs(large, ["micro"], 8192)
    assert expand_runs(large, ["micro"], 8192, {"allow_large_delta": True})


def test_an_unknown_setting_is_refused_by_name():
    with pytest.raises(DpvipInputError, match="dp_pretrain run vip_micro: setting 'sigma' is not known"):
        expand_runs(section(settings=SETTINGS | {"sigma": 0.5}), ["micro"], 8192)


def test_the_ablation_model_must_be_a_main_model():
    with pytest.raises(DpvipInputError, match="ablation_model 'mini' is not one of dp_pretrain.models"):
        expand_runs(section(ablation_model="mini"), ["micro", "mini"], 8192)


def test_without_a_known_dataset_size_every_dataset_point_is_a_run():
    runs = expand_runs(section(ablations={"dataset_size": [2048]}), ["micro"], None)
    assert "vip_micro_n2048" in runs


def test_a_multi_node_syn_vip_run_splits_its_batch_over_every_process():
    from dpvip.plan.pretrain import syn_vip_settings, training_values

    section = merged_config("config.yaml", "paper.yaml")["pretrain"]["syn_vip"]
    assert (section["gpus"], section["nodes"]) == (8, 4)
    assert "nodes" not in training_values(section)  # a launch setting, not a training one
    syn_vip_settings(section, "base", 10**6)  # 4,096 = 32 processes x 2 micro-batches of 64
    with pytest.raises(DpvipInputError, match="does not divide over 48 processes"):
        syn_vip_settings(section | {"nodes": 6}, "base", 10**6)


def test_repeats_are_independent_runs_of_every_run():
    """`repeats: 3`: each run has two more, `<run>_r1` and `<run>_r2`, with the same settings
    but the seed (each also has its own secret key); the ablations do not count them."""
    one = expand_runs(section(), ["micro", "pico"], 4096)
    three = expand_runs(section() | {"repeats": 3}, ["micro", "pico"], 4096)
    assert len(three) == 3 * len(one)
    for name, run in one.items():
        assert repeats_of(three, name) == [name, f"{name}_r1", f"{name}_r2"]
        again = three[f"{name}_r2"]
        assert again.repeat_of == name and again.ablation == REPEAT and again.init == run.init
        assert again.values == run.values | {"seed": run.values.get("seed", 0) + 2}
