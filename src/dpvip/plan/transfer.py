"""The DP transfer runs each table and figure needs (torch-free: the workflow knows every
job, and checks the `dp_transfer` config, before anything runs).

A `FeatureSet` is one cache: a frozen backbone's features of one dataset, under one recipe,
crop and resolution (with `views` augmented copies of the train split for an inception
crop, one per epoch). A `Run` trains a linear head on one feature set, privately or not,
and fills one cell (row, column) of a table or figure (both in `dpvip.plan.transfer_runs`;
Mehta et al.'s studies are expanded into runs in `dpvip.plan.mehta_studies`). A study (`mehta_table1`, ...,
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

import hashlib

from dpvip.errors import DpvipInputError
from dpvip.plan.examples import check_planned_run, examples_source, planned_examples
from dpvip.plan.mehta_studies import MehtaStudies
from dpvip.plan.transfer_runs import FeatureSet, Run
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


def _present(entries: dict) -> dict:
    return {name: value for name, value in entries.items() if value is not None}


class TransferPlan(MehtaStudies):
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

    def check_patch_sizes(self, patch_sizes: dict[str, int]) -> None:
        """Refuse a feature set of an MAE backbone whose image size is not a multiple of the
        backbone's patch size (`patch_sizes`: {`from`: patch size} of this workflow's MAE runs):
        the encoder would see a cropped grid, not the configured size."""
        for feature_set in self.feature_sets().values():
            spec = self.backbones[feature_set.backbone]
            patch = patch_sizes.get(spec["from"])
            if patch and feature_set.image_size % patch:
                raise DpvipInputError(
                    f"dp_transfer backbone {feature_set.backbone} at image size {feature_set.image_size}: not a "
                    f"multiple of its patch size {patch} (dp_transfer.backbones.{feature_set.backbone}.image_size, "
                    "or the study's resolutions)"
                )

    def runs_digest(self, study: str) -> str:
        """SHA-256 of `study`'s runs: its job's param, so a change to any run reruns it while
        Snakemake's "params have changed" line stays short (the runs' repr is ~55 KB); the
        job rebuilds the runs from the config and checks them against it."""
        return hashlib.sha256(repr(self.runs(study)).encode()).hexdigest()

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
