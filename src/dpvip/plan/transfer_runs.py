"""What a DP transfer run is (torch-free): a `FeatureSet` (one cache of a frozen backbone's
features), a `Run` (a linear head trained on one feature set, filling one cell of a table or
figure), and the names Mehta et al.'s tables use for models, batches and columns."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PRIVATE, NON_PRIVATE, BEST = "With privacy", "Without privacy", "Best"
TABLE5_MODEL = "ViT-B/16"  # Mehta Table 5: ViT-B/16 pre-trained on ImageNet-21k
MAIN_MODEL = "ViT-H/14-4B"  # the paper's best network, which `mehta.main` stands in for (Table 4, Figures 1b, 2)


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


def batch_label(name: str) -> str:
    return f"batch={name}"
