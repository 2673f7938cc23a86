"""Mehta et al.'s tables and figures as DP transfer runs (torch-free): each study's runs,
expanded from `dp_transfer.mehta` by `MehtaStudies`, which `dpvip.plan.transfer.TransferPlan`
builds on (its `mehta` section, `backbones`, `features`, `run_options` and `validation`)."""

from __future__ import annotations

import math

from dpvip.errors import DpvipInputError
from dpvip.plan.transfer_runs import BEST, NON_PRIVATE, PRIVATE, FeatureSet, Run, batch_label, table5_backbone


class MehtaStudies:
    """The run expansions of Mehta et al.'s studies (`_mehta(name)`), on a `TransferPlan`."""

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
                (f"Resolution {t4['paper_resolution']} -> {label}", self._inception(main, dataset, size), {})
                for label, size in t4["resolutions"].items()
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
