"""Settings of one DP-RandP private run (Phases II and III), torch-free.

Defaults are the paper's (Tables 13-15 and the ANCHORS): batch 4096, augmentation
multiplicity 16, C = 1, SGD with momentum 0 and no weight decay, EMA decay 0.9999 with
warm-up, PRV accounting at delta 1e-5, 32 px. The schedule (total steps, Phase II steps,
both learning rates) comes from the task's entry for the run's epsilon.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from dpvip.errors import DpvipInputError
from dpvip.privacy import ACCOUNTANTS, check_randomness
from dpvip.plan.examples import check_planned_run, examples_source, planned_examples
from dpvip.plan.dprandp_runs import DPRandPPlan, PrivateRun, epsilon_label


@dataclass(frozen=True)
class PrivateSettings:
    model: str
    epsilon: float  # math.inf: clipping without noise
    steps: int
    phase2_steps: int
    lr_phase2: float
    lr_phase3: float
    batch_size: int = 4096  # expected batch size B = q n
    augmult: int = 16
    clip_norm: float = 1.0
    delta: float = 1e-5
    accountant: str = "prv"
    ema_decay: float = 0.9999
    momentum: float = 0.0
    image_size: int = 32
    padding: int = 4
    micro_batch: int = 256  # examples per forward/backward pass: bounds memory, not the result
    seed: int = 0
    randomness: str = "secret"  # privacy.randomness: secret, or seeded (reproducible, NOT private)
    allow_large_delta: bool = False  # privacy.allow_large_delta: run with delta >= 1/n
    checkpoint_every: int = 100

    def check(self) -> None:
        check_randomness(self.randomness)
        for key in ("steps", "batch_size", "augmult", "micro_batch", "checkpoint_every", "image_size"):
            value = getattr(self, key)
            if int(value) != value or value < 1:
                raise DpvipInputError(f"{key} {value} must be a positive integer")
        if not 0 <= self.phase2_steps <= self.steps:
            raise DpvipInputError(f"phase2_steps {self.phase2_steps} must be within 0..steps ({self.steps})")
        for key in ("lr_phase2", "lr_phase3", "clip_norm"):
            if not getattr(self, key) > 0:
                raise DpvipInputError(f"{key} {getattr(self, key)} must be positive")
        if not self.epsilon > 0:
            raise DpvipInputError(f"epsilon {self.epsilon} must be positive (or inf)")
        if not 0 < self.delta < 1:
            raise DpvipInputError(f"delta {self.delta} is outside (0, 1)")
        if self.accountant not in ACCOUNTANTS:
            raise DpvipInputError(f"accountant '{self.accountant}' is not one of {', '.join(ACCOUNTANTS)}")
        if not 0 <= self.ema_decay < 1:
            raise DpvipInputError(f"ema_decay {self.ema_decay} must be in [0, 1)")
        if not 0 <= self.momentum < 1:
            raise DpvipInputError(f"momentum {self.momentum} must be in [0, 1)")
        if self.padding < 0:
            raise DpvipInputError(f"padding {self.padding} must not be negative")

    @property
    def private(self) -> bool:
        return math.isfinite(self.epsilon)

    def sample_rate(self, examples: int) -> float:
        if self.batch_size > examples:
            raise DpvipInputError(f"batch_size {self.batch_size} exceeds the {examples} training examples")
        return self.batch_size / examples

    def fingerprint(self) -> dict:
        """JSON-ready (epsilon inf as 'inf'); what a resumed run must share."""
        return asdict(self) | {"epsilon": epsilon_label(self.epsilon)}


TASK_KEYS = ("batch_size", "delta")
SHARED_KEYS = (
    "augmult",
    "clip_norm",
    "accountant",
    "ema_decay",
    "momentum",
    "image_size",
    "padding",
    "micro_batch",
    "checkpoint_every",
)


def private_settings(plan: DPRandPPlan, run: PrivateRun) -> PrivateSettings:
    """The settings of `run` from the plan's config: shared keys from `private`, batch size
    and delta from the task, the schedule entry of its epsilon, its Phase II steps."""
    section = plan.section["private"]
    task = plan.tasks[run.task]
    entry = plan.entry(run.task, run.epsilon)
    shared = {key: section[key] for key in SHARED_KEYS if key in section}
    own = {key: task[key] for key in TASK_KEYS if key in task}
    settings = PrivateSettings(
        model=run.model,
        epsilon=run.epsilon,
        steps=entry.steps,
        phase2_steps=run.phase2_steps,
        lr_phase2=entry.lr_phase2,
        lr_phase3=entry.lr_phase3,
        seed=run.seed,
        **plan.run_options,
        **shared,
        **own,
    )
    settings.check()
    examples = planned_examples(task.get("data"))
    if examples is not None:
        key = f"dprandp.private.tasks.{run.task}"
        check_planned_run(
            examples_source(task["data"], f"{key}.data"),
            examples,
            settings.allow_large_delta,
            batch=(f"{key}.batch_size", settings.batch_size),
            delta=(f"{key}.delta", settings.delta if settings.private else None),
        )
    return settings
