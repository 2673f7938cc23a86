"""DP-RandP Phase I settings, torch-free (the workflow checks its config before any job
runs).

Defaults are the paper's: WRN-16-4 on 32 px images, 200 epochs of batch 256, SGD with lr
0.12 per 256 images, momentum 0.9, weight decay 1e-4 and x0.1 at epochs 155, 170, 185;
alignment and uniformity with alpha = t = 2 on a 4096-4096-128 projection head. The `moco_`
keys hold the official MoCo repository's defaults (DP-RandP Table 11): queue 65536, key
encoder momentum 0.999, temperature 0.07, lr 0.03 per 256 and x0.1 at epochs 120 and 160.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, fields

from dpvip.errors import DpvipInputError
from dpvip.models import WRN_SIZES

METHODS = ("align_uniform", "moco")
# Config keys that say where the run comes from (the caller passes data, model and method).
IGNORED_KEYS = ("model", "dataset", "method")
# Nested config groups: config key -> {inner key: field}.
GROUPS = {
    "projection": {"hidden": "projection_hidden", "out": "projection_out"},
    "moco": {
        "queue": "moco_queue",
        "momentum": "moco_momentum",
        "temperature": "moco_temperature",
        "lr": "moco_lr",
        "milestones": "moco_milestones",
    },
}
CONFIG_KEY = {field: f"{group}.{inner}" for group, inner_keys in GROUPS.items() for inner, field in inner_keys.items()}
# Keys that only one method reads: the other method's runs do not depend on them.
METHOD_KEYS = {
    "align_uniform": ("lr", "milestones", "alpha", "t"),
    "moco": ("moco_queue", "moco_momentum", "moco_temperature", "moco_lr", "moco_milestones"),
}


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Phase1Settings:
    model: str = "wrn16_4"
    method: str = "align_uniform"
    image_size: int = 32
    epochs: int = 200
    batch_size: int = 256
    lr: float = 0.12  # per 256 images
    momentum: float = 0.9
    weight_decay: float = 1e-4
    milestones: tuple[int, ...] = (155, 170, 185)
    projection_hidden: int = 4096
    projection_out: int = 128
    alpha: float = 2.0
    t: float = 2.0
    moco_queue: int = 65536
    moco_momentum: float = 0.999
    moco_temperature: float = 0.07
    moco_lr: float = 0.03  # per 256 images
    moco_milestones: tuple[int, ...] = (120, 160)
    seed: int = 0
    # How the run is carried out; none of these change the result.
    checkpoint_every: int = 500
    log_every: int = 50
    workers: int = 0

    OPERATIONAL = ("checkpoint_every", "log_every", "workers")

    @classmethod
    def from_config(cls, section: dict, model: str, method: str) -> Phase1Settings:
        """From a `dprandp.phase1`-shaped section (absent keys take the paper's values);
        `model` and `method` come from the caller, the section's own are ignored."""
        values = {}
        for key, value in section.items():
            if key in IGNORED_KEYS:
                continue
            if key in GROUPS:
                if not isinstance(value, dict):
                    raise DpvipInputError(f"setting {key} must be a mapping of {', '.join(GROUPS[key])}, not {value!r}")
                for inner, inner_value in value.items():
                    if inner not in GROUPS[key]:
                        raise DpvipInputError(f"setting '{key}.{inner}' is not known (known: {', '.join(GROUPS[key])})")
                    values[GROUPS[key][inner]] = inner_value
            elif key in CONFIG_KEY or key not in {f.name for f in fields(cls)}:
                known = sorted({f.name for f in fields(cls)} - set(CONFIG_KEY) | set(GROUPS))
                raise DpvipInputError(f"setting '{key}' is not known (known: {', '.join(known)})")
            else:
                values[key] = value
        values = {k: (tuple(v) if isinstance(v, list) else v) for k, v in values.items()}
        settings = cls(model=model, method=method, **values)
        settings.check()
        return settings

    def check(self) -> None:
        """Raise DpvipInputError naming the first bad key and its value."""
        if self.model not in WRN_SIZES:
            raise DpvipInputError(f"model '{self.model}' is not a WRN size (known: {', '.join(WRN_SIZES)})")
        if self.method not in METHODS:
            raise DpvipInputError(f"method '{self.method}' is not one of {', '.join(METHODS)}")
        # (field, test, what the value must be)
        rules = [
            # The network halves the image twice; the flattened map feeds the projection head.
            ("image_size", lambda v: _integer(v) and v >= 4 and v % 4 == 0, "a multiple of 4, at least 4"),
            ("epochs", lambda v: _integer(v) and v >= 1, "an integer >= 1"),
            ("batch_size", lambda v: _integer(v) and v >= 2, "an integer >= 2 (uniformity compares pairs)"),
            ("lr", lambda v: _number(v) and v > 0, "a positive number"),
            ("momentum", lambda v: _number(v) and 0 <= v < 1, "a number in [0, 1)"),
            ("weight_decay", lambda v: _number(v) and v >= 0, "a number >= 0"),
            ("milestones", _increasing_epochs, "a list of increasing epochs >= 1"),
            (
                "projection_hidden",
                lambda v: _integer(v) and v >= 16 and v % 16 == 0,
                "a multiple of 16 (GroupNorm of 16 groups)",
            ),
            ("projection_out", lambda v: _integer(v) and v >= 1, "an integer >= 1"),
            ("alpha", lambda v: _number(v) and v > 0, "a positive number"),
            ("t", lambda v: _number(v) and v > 0, "a positive number"),
            ("moco_queue", lambda v: _integer(v) and v >= 1, "an integer >= 1"),
            ("moco_momentum", lambda v: _number(v) and 0 <= v <= 1, "a number in [0, 1]"),
            ("moco_temperature", lambda v: _number(v) and v > 0, "a positive number"),
            ("moco_lr", lambda v: _number(v) and v > 0, "a positive number"),
            ("moco_milestones", _increasing_epochs, "a list of increasing epochs >= 1"),
            ("seed", lambda v: _integer(v) and v >= 0, "an integer >= 0"),
            ("checkpoint_every", lambda v: _integer(v) and v >= 1, "an integer >= 1"),
            ("log_every", lambda v: _integer(v) and v >= 1, "an integer >= 1"),
            ("workers", lambda v: _integer(v) and v >= 0, "an integer >= 0"),
        ]
        for field, test, requirement in rules:
            value = getattr(self, field)
            if not test(value):
                raise DpvipInputError(f"setting {CONFIG_KEY.get(field, field)} {value!r} must be {requirement}")

    # --- what the method uses ------------------------------------------------------------
    @property
    def base_lr(self) -> float:
        """The learning rate of this batch size: (moco_)lr per 256 images x batch / 256."""
        per_256 = self.moco_lr if self.method == "moco" else self.lr
        return per_256 * self.batch_size / 256

    @property
    def lr_milestones(self) -> tuple[int, ...]:
        return self.moco_milestones if self.method == "moco" else self.milestones

    def fingerprint(self) -> dict:
        """What determines the trained weights: all but the OPERATIONAL keys and the keys
        only the other method reads. A resumed run must match it exactly."""
        other = next(m for m in METHODS if m != self.method)
        record = asdict(self)
        for key in (*self.OPERATIONAL, *METHOD_KEYS[other]):
            record.pop(key)
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in record.items()}


def _increasing_epochs(value) -> bool:
    return (
        isinstance(value, tuple)
        and all(_integer(v) and v >= 1 for v in value)
        and all(a < b for a, b in itertools.pairwise(value))
    )
