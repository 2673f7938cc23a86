"""What pre-trained each backbone of the `dp_transfer` section, read from the config sections of
the stages that trained it (torch-free): Mehta et al.'s Tables 6 and 9 (pre-training
hyper-parameters) put it beside the paper's. Keys are the settings' names in those tables
(mehta.csv's columns, and config/paper_values/mehta_settings.yaml).

`stages` holds the config sections: {"syn_vip": pretrain.syn_vip, "dp_pretrain": dp_pretrain,
"dprandp": dprandp.phase1}. The schedules are the training code's, which no config key names:
(Syn)-ViP and DP-MAE warm up then decay by a cosine (dpvip.train.optim), DP-RandP's Phase I
steps x0.1 at its milestones (dpvip.randp.phase1)."""

from __future__ import annotations

from dpvip.models import mae_parameters
from dpvip.plan.dp_pretrain import DPPretrainSettings
from dpvip.plan.vip_runs import expand_runs, synthetic_variants

DPRANDP_MAIN = "main"  # dp_transfer's name of DP-RandP's main Phase I run


def _syn_vip(model: str, s: dict) -> dict:
    low, high = s["crop_scale"]
    return {
        "Epochs": s["epochs"],
        "Base LR": s["blr"],
        "Model size": mae_parameters(model, s["patch_size"]),
        "pre-training data": f"{s['dataset']} (synthetic images; MAE {model})",
        "batch size": s["batch_size"],
        "warm-up": f"{s['warmup_epochs']:g} epoch{'' if s['warmup_epochs'] == 1 else 's'}",
        "decay": f"cosine to {s['min_lr']:g}",
        "weight decay": s["weight_decay"],
        "resolution (px)": s["image_size"],
        "optimizer": f"AdamW ({s['betas'][0]:g}, {s['betas'][1]:g})",
        "augmentation": f"RandomResizedCrop ({low:g}-{high:g}), flip; mask ratio {s['mask_ratio']:g}",
    }


def _dp_mae(name: str, stages: dict) -> dict:
    """A ViP run: its (Syn)-ViP start (the public pre-training), then DP-MAE on the private set."""
    section = stages["dp_pretrain"]
    run = expand_runs(section, [*stages["syn_vip"]["models"], *synthetic_variants(section)], None).get(name)
    if run is None:
        return {}
    settings = DPPretrainSettings.from_config(run.values, run.model)
    public = _syn_vip(run.init, stages["syn_vip"]) if run.init else {}
    start = public["pre-training data"] if public else "random initialisation"
    return public | {
        "Model size": mae_parameters(run.model, settings.model.patch_size),
        "pre-training data": f"{start}, then DP-MAE on {section['dataset']} ({settings.steps} steps of "
        f"{settings.batch_size}, lr {settings.lr:g}, epsilon {settings.epsilon:g})",
    }


def _phase1(p: dict) -> dict:
    return {
        "Epochs": p["epochs"],
        "Base LR": p["lr"],
        "pre-training data": f"{p['dataset']} (synthetic images; {p['method']}, {p['model']})",
        "batch size": p["batch_size"],
        "warm-up": "none",
        "decay": "x0.1 at epochs " + ", ".join(str(m) for m in p["milestones"]),
        "weight decay": p["weight_decay"],
        "resolution (px)": p["image_size"],
        "optimizer": f"SGD (momentum {p['momentum']:g})",
    }


def backbone_pretraining(backbone: str, section: dict, stages: dict) -> dict:
    """{setting: our value} of what pre-trained `backbone` (empty when the config does not say:
    a checkpoint file, or a DP-RandP Phase I ablation)."""
    spec = section["backbones"][backbone]
    if spec["from"] == "syn_vip":
        return _syn_vip(spec["run"], stages["syn_vip"])
    if spec["from"] == "dp_pretrain":
        return _dp_mae(spec["run"], stages)
    if spec["from"] == "dprandp" and spec.get("run") == DPRANDP_MAIN:
        return _phase1(stages["dprandp"])
    return {}
