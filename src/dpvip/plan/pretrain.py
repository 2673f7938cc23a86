"""Pre-training settings, checked without importing torch (the workflow checks them before
any job runs)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from dpvip.errors import DpvipInputError
from dpvip.models import MAESettings, mae_variant


@dataclass(frozen=True)
class PretrainSettings:
    model: MAESettings
    epochs: int
    batch_size: int
    blr: float = 1.5e-4
    min_lr: float = 0.0
    warmup_epochs: float = 40.0
    weight_decay: float = 0.05
    betas: tuple[float, float] = (0.9, 0.95)
    crop_scale: tuple[float, float] = (0.2, 1.0)
    seed: int = 0
    # How the run is carried out; none of these change the result.
    micro_batch: int | None = None
    checkpoint_every: int = 500
    log_every: int = 20
    workers: int = 0

    OPERATIONAL = ("micro_batch", "checkpoint_every", "log_every", "workers")

    @classmethod
    def from_config(cls, values: dict, model: str) -> PretrainSettings:
        """From a config section (model keys and training keys side by side) and a model
        name: a size, or '<size>_dec<depth>' for another decoder depth."""
        return settings_from_config(cls, values, model)

    def check_split(self, processes: int) -> None:
        """The global batch must split evenly over processes, and each share into micro-batches."""
        if self.batch_size % processes:
            raise DpvipInputError(f"batch_size {self.batch_size} does not divide over {processes} processes (gpus)")
        share = self.batch_size // processes
        if self.micro_batch is not None and share % self.micro_batch:
            raise DpvipInputError(f"micro_batch {self.micro_batch} does not divide the per-process batch {share}")

    @property
    def lr(self) -> float:
        return self.blr * self.batch_size / 256

    def fingerprint(self) -> dict:
        return fingerprint(self)


def fingerprint(settings) -> dict:
    """What determines the trained weights (all but the OPERATIONAL keys); a resumed run
    must match it exactly."""
    record = asdict(settings)
    for key in settings.OPERATIONAL:
        record.pop(key)
    return _json_ready(record)


def settings_from_config(cls, values: dict, model: str):
    """`cls` (a settings dataclass with a `model` field) from a config section that holds the
    MAE's keys and the training keys side by side, for model `<size>` or `<size>_dec<depth>`."""
    model_keys = tuple(f.name for f in fields(MAESettings))
    known = {f.name for f in fields(cls)} - {"model"}
    unknown = sorted(set(values) - known - set(model_keys))
    if unknown:
        raise DpvipInputError(
            f"setting '{unknown[0]}' is not known (known: {', '.join(sorted(known | set(model_keys)))})"
        )
    size, decoder_depth = mae_variant(model)
    model_values = {k: values[k] for k in model_keys if k in values and k != "size"}
    if decoder_depth is not None:
        model_values["decoder_depth"] = decoder_depth
    settings = MAESettings(size=size, **model_values)
    settings.check()
    training = {k: (tuple(v) if isinstance(v, list) else v) for k, v in values.items() if k in known}
    return cls(model=settings, **training)


def _json_ready(value):
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    return list(value) if isinstance(value, tuple) else value


def first_difference(stored: dict, current: dict, prefix: str = "") -> str | None:
    """The first key (dotted) whose value differs, as "key old (now new)"; None if equal."""
    for key in sorted(set(stored) | set(current)):
        old, new = stored.get(key), current.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            found = first_difference(old, new, f"{prefix}{key}.")
            if found:
                return found
        elif old != new:
            return f"{prefix}{key} {old!r} (now {new!r})"
    return None


# Keys of the workflow's pretrain.syn_vip section that say where and how often, not how.
WORKFLOW_KEYS = ("dataset", "models", "gpus", "nodes", "threads", "reconstructions")


def training_values(section: dict) -> dict:
    """The section's keys that `PretrainSettings.from_config` takes."""
    return {key: value for key, value in section.items() if key not in WORKFLOW_KEYS}


def shortened(section: dict, epochs: int) -> dict:
    """The section for a shorter pre-training of `epochs` epochs, its warm-up the same share."""
    full = section["epochs"]
    warmup = section.get("warmup_epochs", PretrainSettings.warmup_epochs)
    return section | {"epochs": epochs, "warmup_epochs": warmup * epochs / full}


def syn_vip_settings(section: dict, model: str, dataset_images: int) -> PretrainSettings:
    """The settings of one (Syn)-ViP run from the workflow's config section, checked against
    the dataset size and the number of processes (one per GPU) before any job runs."""
    settings = PretrainSettings.from_config(training_values(section), model)
    try:
        settings.check_split(max(1, section.get("gpus", 0)) * section.get("nodes", 1))  # processes in all
    except DpvipInputError as err:
        raise DpvipInputError(f"pretrain.syn_vip.{err}") from None
    if dataset_images < settings.batch_size:
        raise DpvipInputError(
            f"pretrain.syn_vip.batch_size {settings.batch_size} exceeds the {dataset_images} images "
            f"of dataset '{section['dataset']}'"
        )
    return settings
