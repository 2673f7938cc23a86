"""The DP pre-training runs a config asks for: the main ViP runs and the paper's ablations,
expanded into named runs (without importing torch, so the workflow checks them first).

- main: `vip_<model>` for each of `models`, from the (Syn)-ViP checkpoint of that model;
- dataset size (ViP Figure 3a, Table 10): `vip_<m>_n<examples>`, the first `examples` of the
  dataset (delta = 1/(2n) and q = B/n follow n, so sigma does too);
- random initialisation (Figure 3b, Figure 7): `vip_<model>_random`;
- model size (Figure 4a, Table 9): `vip_<model>` from each model's (Syn)-ViP checkpoint;
- batch size (Figure 4b, Table 10): `vip_<m>_b<B>`, with T scaled so that B * T, the number of
  per-example gradients, stays the main run's ("the same computational budget");
- decoder depth and mask ratio (Table 11): `vip_<m>_dec<d>` and `vip_<m>_mask<percent>`;
- privacy budget (Table 8): `vip_<m>_eps<epsilon>`, each with its own T ("the same training
  hyperparameters ... except for the noise multiplier and total iterations");
- synthetic pre-training length (Figure 3b: 20 against 900 epochs): `vip_<m>_syn_e<epochs>`,
  from a (Syn)-ViP of the ablation model pre-trained for `epochs` (`<m>_e<epochs>`, see
  `synthetic_variants`).

`<m>` is the ablation model (ViP: Base). A point equal to the main run (the whole dataset,
the main batch size, the default decoder depth or mask ratio) is the main run itself.

With `repeats: k` every run above also has k - 1 independent repeats, `<run>_r<j>` (the same
settings, seed + j, its own secret key): the claims compare them as the runs of a group; the
tables and figures show the first run.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpvip.errors import DpvipInputError
from dpvip.models import mae_size, mae_variant
from dpvip.privacy import refuse_large_delta, run_options
from dpvip.plan.dp_pretrain import DPPretrainSettings

ABLATIONS = (
    "dataset_size",
    "random_init",
    "model_size",
    "batch_size",
    "decoder_depth",
    "mask_ratio",
    "epsilon",
    "synthetic_epochs",
)


def synthetic_variants(section: dict) -> dict[str, tuple[str, int]]:
    """{(Syn)-ViP run name: (model, epochs)} of the shorter synthetic pre-trainings the
    `synthetic_epochs` ablation starts from: `<ablation model>_e<epochs>`."""
    anchor = ablation_model(section)
    return {
        f"{anchor}_e{epochs}": (anchor, int(epochs))
        for epochs in section.get("ablations", {}).get("synthetic_epochs", [])
    }


@dataclass(frozen=True)
class DPRun:
    name: str
    model: str  # a size, or <size>_dec<depth>
    init: str | None  # the (Syn)-ViP model it starts from; None: random initialisation
    values: dict  # DPPretrainSettings keys
    ablation: str = "main"  # "main", one of ABLATIONS, or REPEAT
    point: object = None  # the ablated value (examples, batch size, depth, ratio, epsilon, model)
    repeat_of: str | None = None  # a repeat's first run


REPEAT = "repeat"


def repeats_of(runs: dict[str, DPRun], name: str) -> list[str]:
    """`name` and its repeats, in order."""
    return [name, *(run.name for run in runs.values() if run.repeat_of == name)]


def _main_name(model: str) -> str:
    return f"vip_{model}"


def ablation_model(section: dict) -> str:
    return section.get("ablation_model") or section["models"][0]


def expand_runs(
    section: dict, syn_vip_models: list[str], dataset_examples: int | None, privacy: dict | None = None
) -> dict[str, DPRun]:
    """{name: run} for the config section `dp_pretrain`; every run's settings checked (against
    the dataset's size when the config knows it). Every run takes the `privacy` section's
    run options (randomness, allow_large_delta)."""
    base = dict(section.get("settings", {})) | run_options(privacy)
    ablations = section.get("ablations", {})
    runs: dict[str, DPRun] = {}

    def add(name: str, model: str, init: str | None, ablation: str, point, **changes) -> None:
        values = base | changes
        try:
            settings = DPPretrainSettings.from_config(values, model)
            if dataset_examples:
                examples = settings.examples_of(dataset_examples)
                settings.sample_rate(examples)
                refuse_large_delta(settings.delta_for(examples), examples, settings.allow_large_delta)
        except DpvipInputError as err:
            raise DpvipInputError(f"dp_pretrain run {name}: {err}") from None
        if init is not None and init not in syn_vip_models:
            raise DpvipInputError(
                f"dp_pretrain run {name} starts from (Syn)-ViP '{init}', which pretrain.syn_vip.models does not train"
            )
        runs[name] = DPRun(name, model, init, values, ablation, point)

    for model in section["models"]:
        add(_main_name(model), model, model, "main", model)
    for model in ablations.get("model_size", []):
        if _main_name(model) not in runs:
            add(_main_name(model), model, model, "model_size", model)
    anchor = ablation_model(section)
    if _main_name(anchor) not in runs:
        raise DpvipInputError(
            f"dp_pretrain.ablation_model '{anchor}' is not one of dp_pretrain.models "
            "or dp_pretrain.ablations.model_size"
        )
    for model in ablations.get("random_init", []):
        add(f"vip_{model}_random", model, None, "random_init", model)
    for examples in ablations.get("dataset_size", []):
        if dataset_examples is None or examples < dataset_examples:
            add(f"vip_{anchor}_n{examples}", anchor, anchor, "dataset_size", examples, examples=examples)
    main = DPPretrainSettings.from_config(base, anchor)
    for batch in ablations.get("batch_size", []):
        if batch != main.batch_size:
            steps = main.batch_size * main.steps // batch
            # warm-up as the same fraction of training as the main run's
            warmup = max(1, round(main.warmup_steps * steps / main.steps)) if main.warmup_steps else 0
            add(
                f"vip_{anchor}_b{batch}",
                anchor,
                anchor,
                "batch_size",
                batch,
                batch_size=batch,
                steps=steps,
                warmup_steps=warmup,
            )
    size, _ = mae_variant(anchor)
    for depth in ablations.get("decoder_depth", []):
        if depth != mae_size(size).decoder_depth:
            add(f"vip_{size}_dec{depth}", f"{size}_dec{depth}", anchor, "decoder_depth", depth)
    for ratio in ablations.get("mask_ratio", []):
        if ratio != main.model.mask_ratio:
            add(f"vip_{anchor}_mask{round(ratio * 100)}", anchor, anchor, "mask_ratio", ratio, mask_ratio=ratio)
    for budget in ablations.get("epsilon", []):
        if budget["epsilon"] != main.epsilon:
            steps = budget["steps"]
            name = f"vip_{anchor}_eps{budget['epsilon']:g}"
            add(
                name,
                anchor,
                anchor,
                "epsilon",
                budget["epsilon"],
                epsilon=budget["epsilon"],
                steps=steps,
                warmup_steps=min(main.warmup_steps, steps),
            )
    for name, (model, epochs) in synthetic_variants(section).items():
        add(f"vip_{anchor}_syn_e{epochs}", anchor, name, "synthetic_epochs", epochs)
    for run in list(runs.values()):
        for k in range(1, int(section.get("repeats", 1))):
            seed = int(run.values.get("seed", 0)) + k
            runs[f"{run.name}_r{k}"] = DPRun(
                f"{run.name}_r{k}", run.model, run.init, run.values | {"seed": seed}, REPEAT, k, run.name
            )
    return runs


def figure_runs(section: dict, runs: dict[str, DPRun], dataset_examples: int | None) -> dict[str, list[str]]:
    """The runs each loss-curve figure compares, in legend order (only runs that exist)."""
    anchor = ablation_model(section)
    ablations = section.get("ablations", {})
    main = _main_name(anchor)
    sizes = sorted(
        [
            f"vip_{anchor}_n{n}"
            for n in ablations.get("dataset_size", [])
            if dataset_examples is None or n < dataset_examples
        ],
        key=lambda name: runs[name].values["examples"],
    )
    batches = [run.name for run in runs.values() if run.ablation == "batch_size"]
    members = {
        "vip_figure3a": [*sizes, main],
        "vip_figure3b": [
            main,
            *(f"vip_{anchor}_syn_e{e}" for e in ablations.get("synthetic_epochs", [])),
            f"vip_{anchor}_random",
        ],
        "vip_figure4a": [_main_name(m) for m in dict.fromkeys([*section["models"], *ablations.get("model_size", [])])],
        "vip_figure4b": sorted([*batches, main], key=lambda name: runs[name].values.get("batch_size", 0)),
        "vip_figure7": [f"vip_{m}_random" for m in ablations.get("random_init", [])],
    }
    return {figure: [name for name in names if name in runs] for figure, names in members.items()}
