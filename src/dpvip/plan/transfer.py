"""The DP transfer runs each table and figure needs (torch-free: the workflow knows every
job, and checks the `dp_transfer` config, before anything runs).

A `FeatureSet` is one cache: a frozen backbone's features of one dataset, under one recipe,
crop and resolution (with `views` augmented copies of the train split for an inception
crop, one per epoch). A `Run` trains a linear head on one feature set, privately or not,
and fills one cell (row, column) of a table or figure. A study (`mehta_table1`, ...,
`dprandp_probe_cifar`) is one job: every run one table or figure shows, on cached
features, in seconds each, so one job per study keeps job start-up small; rebuilding one
table runs only its study and the caches it reads.

Mehta et al. tuned only the learning rate, choosing on test accuracy (not accounted for in
their privacy budget); each cell therefore holds runs over a learning-rate grid. By default
(`mehta.selection.mode: validation`) every head trains on the training split less a held-out
share and the cell takes the learning rate with the best mean validation accuracy over seeds
(its test accuracy is shown); `mode: test` trains on the whole split and takes the best mean
test accuracy, as the paper did. What the privacy guarantee then covers is
`VALIDATION_PRIVACY` / `TEST_PRIVACY`, recorded in each study's result.

The held-out share of a DP head's data is a seeded uniform cut that reads no label (not a
stratified one): which examples are held out then does not depend on the data's content, so
two training sets that differ in one example's presence are cut into training parts that
differ in at most that example. A stratified cut reads every label, and changing one label
can move other examples across the cut.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from dpvip.errors import DpvipInputError
from dpvip.plan.examples import check_planned_run, examples_source, planned_examples
from dpvip.privacy import run_options
from dpvip.selection import TEST, Selection, held_out_count

KINDS = {"syn_vip": "mae", "dp_pretrain": "mae", "dprandp": "wrn"}  # `from` -> network kind
MEHTA_TABLES = ("table1", "table2", "table3", "table4", "table5")
MEHTA_FIGURES = ("figure1b", "figure2")
PROBE_TABLES = {"table4": "cifar", "table22": "cifar", "table5": "imagenet", "table23": "imagenet"}
# Mehta et al.'s hyper-parameter tables: the study whose recorded runs give our side (None: the
# pre-training Tables 6 and 9 read the config only). Table 10 (throughput) reads Table 2's DP-LAMB runs.
MEHTA_HYPERPARAMETER_TABLES = {"table6": None, "table7": "table1", "table8": "table2", "table9": None}
MEHTA_THROUGHPUT_STUDY = "table2"
STUDIES = (
    *(f"mehta_{t}" for t in MEHTA_TABLES),
    *(f"mehta_{f}" for f in MEHTA_FIGURES),
    "dprandp_probe_cifar",
    "dprandp_probe_imagenet",
)
PRIVATE, NON_PRIVATE, BEST = "With privacy", "Without privacy", "Best"
TABLE5_MODEL = "ViT-B/16"  # Mehta Table 5: ViT-B/16 pre-trained on ImageNet-21k
MAIN_MODEL = "ViT-H/14-4B"  # the paper's best network, which `mehta.main` stands in for (Table 4, Figures 1b, 2)


VALIDATION_PRIVACY = (
    "Each run's (epsilon, delta) covers the examples it trains on: the private training split less the "
    "held-out validation share. That share is held out of the private set and treated as public data: the "
    "learning rate is picked on its accuracy without noise, so its examples have no DP guarantee. The cut "
    "is a seeded uniform one that reads no label, fixed before any run. Picking among the grid's runs is not "
    "accounted in one run's epsilon (nor in the paper's); for the training examples the pick is covered by "
    "the composition of every run of the grid, seeds included (the tables' grid note gives it)."
)
TEST_PRIVACY = (
    "Each run's (epsilon, delta) covers the whole private training split. The learning rate is picked on "
    "test accuracy (the paper's practice; optimistic: the winner's curse inflates the number shown). Picking "
    "among the grid's runs is not accounted in one run's epsilon (nor in the paper's); the pick is covered by "
    "the composition of every run of the grid, seeds included (the tables' grid note gives it)."
)


def model_key(model: str) -> str:
    """A paper model's name however the paper spells it: 'ResNet-50x4 (BiT)' and 'ResNet50x4' are one."""
    return re.sub(r"\(bit\)|[\s-]", "", model.lower())


def stand_in_of(model: str, mehta: dict) -> str | None:
    """The backbone standing in for the paper's `model` (`dp_transfer.mehta`): `models`', else the
    main network for ViT-H/14-4B; None when no backbone does."""
    ours = {model_key(name): backbone for name, backbone in (mehta.get("models") or {}).items() if backbone}
    ours.setdefault(model_key(MAIN_MODEL), mehta["main"])
    return ours.get(model_key(model))


def table5_backbone(mehta: dict) -> str:
    """The backbone of Mehta Table 5 (`dp_transfer.mehta`): ViT-B/16's stand-in, else the main network."""
    return (mehta.get("models") or {}).get(TABLE5_MODEL) or mehta["main"]


@dataclass(frozen=True, order=True)
class FeatureSet:
    backbone: str
    dataset: str
    recipe: str
    image_size: int
    crop: str = "center"
    views: int = 1

    @property
    def path(self) -> str:
        """Its cache folder, relative to results/dp_transfer/features."""
        views = f"_x{self.views}" if self.views > 1 else ""
        return f"{self.backbone}/{self.dataset}/{self.recipe}_{self.crop}{self.image_size}{views}"


@dataclass(frozen=True)
class Run:
    kind: str  # "head" (Mehta et al.) or "probe" (DP-RandP)
    row: str
    column: str
    features: FeatureSet
    settings: dict = field(hash=False)  # HeadSettings or PrivateProbeSettings fields

    @property
    def key(self) -> str:
        """Unique within its study: what a resumed study job skips."""
        values = ",".join(f"{k}={self.settings[k]}" for k in sorted(self.settings))
        return f"{self.row}|{self.column}|{self.features.path}|{values}"

    def record(self) -> dict:
        return {
            "kind": self.kind,
            "row": self.row,
            "column": self.column,
            "features": self.features.path,
            "settings": self.settings,
            "key": self.key,
        }


def _present(entries: dict) -> dict:
    return {name: value for name, value in entries.items() if value is not None}


def batch_label(name: str) -> str:
    return f"batch={name}"


class TransferPlan:
    """The caches and runs of every Mehta et al. and DP-RandP private-probing table."""

    def __init__(self, section: dict, privacy: dict | None = None):
        self.section = section
        self.run_options = run_options(privacy)  # randomness, allow_large_delta: every run's
        # A null entry removes what a merged-over config defines (paper.yaml over the embedded).
        self.backbones: dict = _present(section.get("backbones", {}))
        self.datasets: dict = _present(section.get("datasets", {}))
        self.mehta: dict = dict(section.get("mehta", {}))
        if self.mehta:
            self.mehta["models"] = _present(self.mehta.get("models", {}))
        self.probe: dict = section.get("dprandp_probe", {})
        # The DP heads' validation cut reads no label (see the module's note).
        self.selection = (
            Selection.of(dict(self.mehta.get("selection") or {}) | {"stratified": False}) if self.mehta else TEST
        )
        self._check()
        self._check_sizes()

    # ---- configuration checks -------------------------------------------------------------
    def _check(self) -> None:
        for name, spec in self.backbones.items():
            if spec.get("from") not in (*KINDS, "file"):
                raise DpvipInputError(
                    f"dp_transfer.backbones.{name}.from '{spec.get('from')}' is not one of "
                    f"{', '.join((*KINDS, 'file'))}"
                )
        used = dict(self.mehta.get("models", {}))
        if self.mehta:
            used["main"] = self.mehta["main"]
        used |= {f"dprandp_probe.{k}": v["backbone"] for k, v in self.probe.items()}
        for where, backbone in used.items():
            if backbone not in self.backbones:
                raise DpvipInputError(
                    f"dp_transfer {where} uses backbone '{backbone}', which dp_transfer.backbones does not define "
                    f"(known: {', '.join(self.backbones) or 'none'})"
                )
        datasets = list(self.mehta.get("datasets", {}).values()) + [v["dataset"] for v in self.probe.values()]
        for dataset in datasets:
            if dataset not in self.datasets:
                raise DpvipInputError(
                    f"dp_transfer uses dataset '{dataset}', which dp_transfer.datasets does not define "
                    f"(known: {', '.join(self.datasets) or 'none'})"
                )

    def _check_sizes(self) -> None:
        """delta < 1/n of every private run on a dataset whose entry fixes n (the embedded
        digits), n less the share dp_transfer.mehta.selection holds out: caught by the dry
        run, not by the study job. (batch <= n always holds: a batch is a fraction <= 1 of n.)"""
        sizes = {name: planned_examples(spec) for name, spec in self.datasets.items()}
        if not any(sizes.values()):
            return
        allowed = self.run_options["allow_large_delta"]
        for study in STUDIES:
            for run in self.runs(study):
                dataset = run.features.dataset
                examples = sizes.get(dataset)
                if examples is None or run.settings.get("epsilon") is None:
                    continue
                where = examples_source(self.datasets[dataset], f"dp_transfer.datasets.{dataset}")
                if "validation" in run.settings:  # the held-out share trains nothing
                    held = held_out_count(examples, run.settings["validation"]["fraction"])
                    examples -= held
                    where += f" less the {held} dp_transfer.mehta.selection holds out"
                check_planned_run(
                    f"{where}; study {study}",
                    examples,
                    allowed,
                    delta=(self._delta_key(study, run), run.settings["delta"]),
                )

    def _delta_key(self, study: str, run: Run) -> str:
        """The config key a run's delta comes from."""
        if study.startswith("dprandp_probe_"):
            return f"dp_transfer.dprandp_probe.{study.removeprefix('dprandp_probe_')}.delta"
        if study == "mehta_figure1b" and run.row.startswith("delta="):
            return "dp_transfer.mehta.figure1b.deltas"
        return "dp_transfer.mehta.delta"

    def selection_record(self, study: str) -> dict | None:
        """How `study`'s cells choose their learning rate and what the privacy guarantee then
        covers, as its result records it (None: DP-RandP's probes, one learning rate per cell)."""
        if not study.startswith("mehta_") or not self.mehta:
            return None
        record = self.selection.record() | {
            "chooses": "each cell's learning rate, on the mean accuracy over seeds",
            "privacy": VALIDATION_PRIVACY if self.selection.validating else TEST_PRIVACY,
        }
        if self.selection.validating:
            record["validation_view"] = "the first cached train view (an inception crop where the study trains on them)"
        return record

    def validation(self) -> dict:
        """The `validation` setting of every head run ({} in test mode: the whole split trains)."""
        if not self.selection.validating:
            return {}
        s = self.selection
        return {"validation": {"fraction": s.fraction, "seed": s.seed, "stratified": s.stratified}}

    def kind(self, backbone: str) -> str:
        spec = self.backbones[backbone]
        return spec["kind"] if spec["from"] == "file" else KINDS[spec["from"]]

    # ---- feature sets ---------------------------------------------------------------------
    def features(
        self,
        backbone: str,
        dataset: str,
        *,
        crop: str = "center",
        image_size: int | None = None,
        views: int = 1,
        recipe: str | None = None,
    ) -> FeatureSet:
        """A feature set of `backbone`: its own recipe and resolution unless given."""
        spec = self.backbones[backbone]
        size = image_size or spec["image_size"]
        return FeatureSet(
            backbone,
            dataset,
            recipe or spec.get("recipe", "prelogits"),
            int(size),
            crop,
            views if crop == "inception" else 1,
        )

    def feature_sets(self) -> dict[str, FeatureSet]:
        return {f.path: f for study in STUDIES for f in self.study_features(study)}

    def study_features(self, study: str) -> list[FeatureSet]:
        return sorted({run.features for run in self.runs(study)})

    # ---- runs -----------------------------------------------------------------------------
    def runs(self, study: str) -> list[Run]:
        if study not in STUDIES:
            raise DpvipInputError(f"no DP transfer study is called '{study}' (known: {', '.join(STUDIES)})")
        if study.startswith("mehta_"):
            return self._mehta(study.removeprefix("mehta_")) if self.mehta else []
        task = study.removeprefix("dprandp_probe_")
        return self._probe(task) if task in self.probe else []

    def _head_runs(
        self, row: str, column: str, features: FeatureSet, optimizer: str, lrs: list, **settings
    ) -> list[Run]:
        common = {
            "clip_norm": self.mehta["clip_norm"],
            "delta": self.mehta["delta"],
            "accountant": self.mehta["accountant"],
        } | self.run_options
        return [
            Run(
                "head",
                row,
                column,
                features,
                common | settings | {"optimizer": optimizer, "lr": float(lr), "seed": seed} | self.validation(),
            )
            for lr in lrs
            for seed in self.mehta["seeds"]
        ]

    def _tuned(self, optimizer: str, schedule: str) -> dict:
        """A multi-epoch fine-tuning (Mehta Tables 7/8): inception crops, warm-up, decay."""
        m = self.mehta
        return {
            "optimizer": optimizer,
            "lrs": m["lrs"][optimizer],
            "schedule": schedule,
            "warmup_epochs": m["warmup_epochs"],
            "epochs": m["epochs"],
        }

    def _inception(self, backbone: str, dataset: str, image_size: int | None = None) -> FeatureSet:
        return self.features(
            backbone, dataset, crop="inception", image_size=image_size, views=math.ceil(self.mehta["epochs"])
        )

    def _batch_sweep(
        self, row: str, backbone: str, optimizer: str, schedule: str, batches: dict, best: bool
    ) -> list[Run]:
        m = self.mehta
        data = self._inception(backbone, m["datasets"]["ImageNet-1k"])
        tuned = self._tuned(optimizer, schedule)
        runs = []
        for name, fraction in batches.items():
            for label, epsilon in ((NON_PRIVATE, None), (PRIVATE, m["epsilon"])):
                runs += self._head_runs(
                    row, f"{label} / {batch_label(name)}", data, **tuned, batch_fraction=fraction, epsilon=epsilon
                )
        if best:  # the non-private reference: momentum SGD at a small batch (paper: 512)
            plain = self._tuned("sgd", "cosine") | {"epochs": m["best"]["epochs"]}
            runs += self._head_runs(
                row, f"{NON_PRIVATE} / {BEST}", data, **plain, batch_fraction=m["best"]["batch_fraction"], epsilon=None
            )
        return runs

    def _mehta(self, name: str) -> list[Run]:
        m = self.mehta
        imagenet = m["datasets"]["ImageNet-1k"]
        batches = m["batch_sizes"]
        largest = {max(batches, key=batches.get): max(batches.values())}
        if name in ("table1", "table2"):
            optimizer, schedule, models = (
                ("sgd", "cosine", m["models"]) if name == "table1" else ("lamb", "linear", m["models"])
            )
            return [
                run
                for model, backbone in models.items()
                for run in self._batch_sweep(
                    f"{model} / Last layer", backbone, optimizer, schedule, batches, name == "table2"
                )
            ]
        if name == "table3":  # every backbone we have, at the largest batch (paper: 2^20)
            return [
                run
                for backbone in self.backbones
                for run in self._batch_sweep(
                    f"Ours: {backbone} / Last layer", backbone, "lamb", "linear", largest, True
                )
            ]
        if name == "table4":
            return self._table4(imagenet, largest)
        if name == "table5":
            return self._table5()
        if name == "figure1b":
            return self._figure1b(imagenet)
        if name == "figure2":
            return self._figure2(imagenet)
        raise DpvipInputError(f"no Mehta et al. study '{name}'")

    def _table4(self, dataset: str, largest: dict) -> list[Run]:
        """One change at a time from DP-LAMB, zero init, inception crop, 10 epochs, clip 1, at
        the largest batch and the fine-tuning resolution."""
        m, t4, main = self.mehta, self.mehta["table4"], self.mehta["main"]
        fraction = next(iter(largest.values()))
        base = {**self._tuned("lamb", "linear"), "batch_fraction": fraction, "epsilon": m["epsilon"]}
        inception = self._inception(main, dataset)
        variants = [
            ("No change", inception, {}),
            ("DP-LAMB -> DP-Adam", inception, self._tuned("adam", "linear")),
            ("DP-LAMB -> DP-SGD with Momentum", inception, self._tuned("sgd", "cosine")),
            ("Zero Init -> Lecun Normal Init", inception, {"init_scale": 1.0}),
            ("Inception Crop -> Center Crop", self.features(main, dataset), {}),
            ("10 epochs -> 1 epochs", inception, {"epochs": 1}),
            *((f"Clip at 1 -> {clip:g}", inception, {"clip_norm": float(clip)}) for clip in t4["clips"]),
            *(
                (f"Resolution {paper} -> {label}", self._inception(main, dataset, size), {})
                for label, size in t4["resolutions"].items()
                for paper in [t4["paper_resolution"]]
            ),
        ]
        return [
            run for row, data, change in variants for run in self._head_runs(row, "Accuracy", data, **(base | change))
        ]

    def _single_step(self) -> dict:
        """One full-batch step (Mehta Fig. 1b, Table 5, App. E.3): centre crop, constant lr.
        At q = 1 the prv accountant is the exact Gaussian mechanism (`accounting`)."""
        return {"batch_fraction": 1.0, "epochs": 1, "schedule": "constant", "warmup_epochs": 0.0, "accountant": "prv"}

    def _table5(self) -> list[Run]:
        m, t5 = self.mehta, self.mehta["table5"]
        backbone = table5_backbone(m)
        runs = []
        for paper_dataset, dataset in m["datasets"].items():
            data = self.features(backbone, dataset, image_size=m.get("single_step_image_size"))
            for epsilon in [None, *t5["epsilons"]]:
                column = "Non-Private" if epsilon is None else f"epsilon={float(epsilon):.1f}"
                runs += self._head_runs(
                    paper_dataset, column, data, "adam", t5["lrs"], **self._single_step(), epsilon=epsilon
                )
        return runs

    def _figure1b(self, dataset: str) -> list[Run]:
        m, f = self.mehta, self.mehta["figure1b"]
        data = self.features(m["main"], dataset, image_size=m.get("single_step_image_size"))
        runs = self._head_runs(
            f"{NON_PRIVATE}", "epsilon=inf", data, "lamb", f["lrs"], **self._single_step(), epsilon=None
        )
        for delta in f["deltas"]:
            for epsilon in f["epsilons"]:
                runs += self._head_runs(
                    f"delta={delta:g}",
                    f"epsilon={epsilon:g}",
                    data,
                    "lamb",
                    f["lrs"],
                    **self._single_step(),
                    epsilon=epsilon,
                    delta=float(delta),
                )
        return runs

    def _figure2(self, dataset: str) -> list[Run]:
        """(a) LAMB against momentum SGD without privacy, per learning rate; (b) accuracy per
        resolution and (c) per initialisation scale, with privacy, of one full-batch step."""
        m, f, main = self.mehta, self.mehta["figure2"], self.mehta["main"]
        step = self._single_step()
        data = self.features(main, dataset, image_size=m.get("single_step_image_size"))
        runs = []
        # (a) at the largest batch over the configured epochs: one step from zero weights is
        # a sign step (Adam, LAMB) or a step along the mean gradient (SGD), whose accuracy
        # does not depend on the learning rate at all.
        largest = max(m["batch_sizes"].values())
        for optimizer, schedule in (("lamb", "linear"), ("sgd", "cosine")):
            tuned = self._tuned(optimizer, schedule) | {"lrs": f["lrs"][optimizer]}
            for lr in tuned.pop("lrs"):
                runs += self._head_runs(
                    f"(a) {optimizer}",
                    f"lr={float(lr):g}",
                    self._inception(main, dataset),
                    lrs=[lr],
                    **tuned,
                    batch_fraction=largest,
                    epsilon=None,
                )
        for size in f["resolutions"]:
            runs += self._head_runs(
                "(b) resolution",
                f"{size}",
                self.features(main, dataset, image_size=size),
                "lamb",
                f["private_lrs"],
                **step,
                epsilon=m["epsilon"],
            )
        for scale in f["init_scales"]:
            runs += self._head_runs(
                "(c) init scale",
                f"{float(scale):g}",
                data,
                "lamb",
                f["private_lrs"],
                **step,
                epsilon=m["epsilon"],
                init_scale=float(scale),
            )
        return runs

    def _probe(self, task: str) -> list[Run]:
        """DP-RandP's private linear probing: full batch, zero init, no bias, T steps."""
        p = self.probe[task]
        data = self.features(p["backbone"], p["dataset"], recipe=p["recipe"], image_size=p.get("image_size"))
        common = {
            "delta": p["delta"],
            "momentum": p["momentum"],
            "clip_norm": p["clip_norm"],
            "feature_norm": p.get("feature_norm"),
        } | self.run_options
        runs = []
        for entry in p["schedule"]:
            epsilon = entry.get("epsilon")
            settings = common | {
                "epsilon": epsilon,
                "steps": entry.get("steps", p.get("steps")),
                "lr": entry["lr"],
                "sigma_ratio": entry.get("sigma_ratio"),
            }
            column = "Non-private" if epsilon is None else f"epsilon={float(epsilon):g}"
            runs += [Run("probe", "Ours", column, data, settings | {"seed": seed}) for seed in p["seeds"]]
        return runs
