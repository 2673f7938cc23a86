"""DP pre-training settings (ViP step 2), checked without importing torch."""

from __future__ import annotations

from dataclasses import dataclass

from dpvip.errors import DpvipInputError
from dpvip.models import MAESettings
from dpvip.privacy import ACCOUNTANTS, OPTIMIZERS, check_randomness
from dpvip.plan.pretrain import fingerprint, settings_from_config


@dataclass(frozen=True)
class DPPretrainSettings:
    """ViP A.2's DP-AdamW by default: expected batch B = q n, T steps, clip C, (epsilon,
    delta) with delta = 1/(2n) unless given; sigma is calibrated, never given."""

    model: MAESettings
    steps: int
    batch_size: int  # the expected batch size q * n
    lr: float = 3.84e-4
    warmup_steps: int = 1000
    min_lr: float = 0.0
    weight_decay: float = 0.005
    betas: tuple[float, float] = (0.9, 0.95)
    adam_eps: float = 1e-8
    momentum: float = 0.9
    optimizer: str = "adamw"
    clip_norm: float = 0.1
    epsilon: float = 8.0
    delta: float | None = None
    accountant: str = "rdp"
    crop_scale: tuple[float, float] = (0.2, 1.0)
    seed: int = 0
    randomness: str = "secret"  # privacy.randomness: secret, or seeded (reproducible, NOT private)
    allow_large_delta: bool = False  # privacy.allow_large_delta: run with delta >= 1/n
    examples: int | None = None  # train on the first `examples` of the dataset (None: all)
    # How the run is carried out; none of these change the result.
    micro_batch: int = 32  # examples per forward/backward pass: bounds memory
    checkpoint_every: int = 100
    log_every: int = 10
    workers: int = 0

    OPERATIONAL = ("micro_batch", "checkpoint_every", "log_every", "workers")

    @classmethod
    def from_config(cls, values: dict, model: str) -> DPPretrainSettings:
        settings = settings_from_config(cls, values, model)
        settings.check()
        return settings

    def check(self) -> None:
        check_randomness(self.randomness)
        if self.examples is not None and (int(self.examples) != self.examples or self.examples < 1):
            raise DpvipInputError(f"examples {self.examples} must be a positive integer")
        for key in ("steps", "batch_size", "micro_batch"):
            if int(getattr(self, key)) != getattr(self, key) or getattr(self, key) < 1:
                raise DpvipInputError(f"{key} {getattr(self, key)} must be a positive integer")
        if self.optimizer not in OPTIMIZERS:
            raise DpvipInputError(f"optimizer '{self.optimizer}' is not one of {', '.join(OPTIMIZERS)}")
        if self.accountant not in ACCOUNTANTS:
            raise DpvipInputError(f"accountant '{self.accountant}' is not one of {', '.join(ACCOUNTANTS)}")
        if not self.clip_norm > 0:
            raise DpvipInputError(f"clip_norm {self.clip_norm} must be positive")
        if not self.epsilon > 0:
            raise DpvipInputError(f"epsilon {self.epsilon} must be positive")
        if self.delta is not None and not 0 < self.delta < 1:
            raise DpvipInputError(f"delta {self.delta} is outside (0, 1)")

    def examples_of(self, dataset_examples: int) -> int:
        """n: the dataset's examples, or the first `examples` of them."""
        if self.examples is None:
            return dataset_examples
        if self.examples > dataset_examples:
            raise DpvipInputError(f"examples {self.examples} exceeds the {dataset_examples} examples of the dataset")
        return self.examples

    def sample_rate(self, examples: int) -> float:
        """q = B / n for n = `examples`; refuses a batch larger than the dataset."""
        if self.batch_size > examples:
            raise DpvipInputError(f"batch_size {self.batch_size} exceeds the {examples} examples of the dataset")
        return self.batch_size / examples

    def delta_for(self, examples: int) -> float:
        """The configured delta, or ViP's 1/(2n)."""
        return self.delta if self.delta is not None else 1.0 / (2 * examples)

    def fingerprint(self) -> dict:
        return fingerprint(self)
