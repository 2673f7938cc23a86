"""DP fine-tuning of a pre-trained encoder on a labelled set (ViP Table 5, appendix A.5).

ViP fine-tunes the whole encoder with a linear head end to end under DP-AdamW on
ImageNet-1K: expected batch B = 262,144 (q = B / n), noise multiplier sigma = 5.6,
T = 1,500 steps, lr 1.02e-3, weight decay 0.005, 50 warm-up steps then a constant lr, the
other AdamW parameters PyTorch's defaults; the result is (8, 8e-7)-DP with respect to
ImageNet. Here sigma is given and epsilon follows from (q, sigma, T, delta), unlike
pre-training, where sigma is calibrated from a target epsilon.

Each step is `dpvip.privacy.step.DPStep`, as in pre-training: the ledger is charged
first, a Poisson batch is drawn, every example's cross-entropy gradient over all trainable
parameters (encoder and head; the decoder is frozen) is clipped to C in flat L2, the sum
gets N(0, sigma^2 C^2) and is divided by B, and AdamW steps.

Not in the paper: the clip norm C of fine-tuning. We use ViP pre-training's C = 0.1; under
Adam a common scale of signal and noise cancels, so C acts only through which examples
it clips (at 0.1, nearly all of them). delta defaults to 1/(2n) (the paper's 8e-7 at
n = 1,281,167 is about 1/n; give it to reproduce that record).

A run saves its state (weights, AdamW, lr schedule, ledger, batch sizes) in its private work
folder every k steps and on SIGTERM; a rerun resumes it to the same weights and ledger. It
runs as several processes too (torchrun): every rank takes its share of each Poisson batch
(`PoissonBatches` splits the sampling blocks over ranks), the clipped sums are all-reduced
before the noise is added once (`DPStep`), and the ranks split the test set.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from dpvip.per_example import PER_EXAMPLE
from dpvip.errors import DpvipInputError
from dpvip.evaluate.features import FeatureChoice
from dpvip.evaluate.accuracy import classifier_score
from dpvip.evaluate.finetune import Classifier
from dpvip.models.mae import MaskedAutoencoder
from dpvip.privacy import ACCOUNTANTS, check_randomness
from dpvip.privacy.clipping import ClippedGradientSum
from dpvip.privacy.ledger import PrivacyLedger
from dpvip.privacy.optimizers import make_optimizer
from dpvip.privacy.randomness import RunRandomness, release_key
from dpvip.privacy.step import DPStep
from dpvip.train.resume import JobState

PAPER_DELTA = 8e-7  # ViP A.5, for ImageNet-1K


@dataclass(frozen=True)
class DPFinetuneSettings:
    batch_size: int = 262_144  # the expected batch size B = q * n
    noise_multiplier: float = 5.6
    steps: int = 1_500
    lr: float = 1.02e-3
    weight_decay: float = 0.005
    warmup_steps: int = 50
    clip_norm: float = 0.1  # not in the paper: ViP pre-training's C
    delta: float | None = None  # None: 1 / (2n)
    accountant: str = "rdp"
    features: FeatureChoice = FeatureChoice(pooling="mean")
    seed: int = 0
    randomness: str = "secret"  # privacy.randomness: secret, or seeded (reproducible, NOT private)
    allow_large_delta: bool = False  # privacy.allow_large_delta: run with delta >= 1/n
    micro_batch: int = 64  # examples per forward/backward pass: bounds memory, not the result

    def check(self) -> None:
        check_randomness(self.randomness)
        for key in ("batch_size", "steps", "micro_batch"):
            value = getattr(self, key)
            if int(value) != value or value < 1:
                raise DpvipInputError(f"{key} {value} must be a positive integer")
        if int(self.warmup_steps) != self.warmup_steps or self.warmup_steps < 0:
            raise DpvipInputError(f"warmup_steps {self.warmup_steps} must be a non-negative integer")
        if not (self.noise_multiplier > 0 and math.isfinite(self.noise_multiplier)):
            raise DpvipInputError(
                f"noise_multiplier {self.noise_multiplier} must be positive and finite (DP fine-tuning adds noise)"
            )
        if not self.lr > 0:
            raise DpvipInputError(f"lr {self.lr} must be positive")
        if not self.weight_decay >= 0:
            raise DpvipInputError(f"weight_decay {self.weight_decay} must not be negative")
        if not self.clip_norm > 0:
            raise DpvipInputError(f"clip_norm {self.clip_norm} must be positive")
        if self.delta is not None and not 0 < self.delta < 1:
            raise DpvipInputError(f"delta {self.delta} is outside (0, 1)")
        if self.accountant not in ACCOUNTANTS:
            raise DpvipInputError(f"accountant '{self.accountant}' is not one of {', '.join(ACCOUNTANTS)}")
        self.features.check()
        if self.features.last_blocks > 1 and self.features.final_norm:
            # The final norm would run once per kept block; the clipper needs one call per layer.
            raise DpvipInputError(
                "features: last_blocks > 1 with final_norm applies one LayerNorm several times, "
                "which per-example clipping refuses"
            )

    def sample_rate(self, examples: int) -> float:
        """q = B / n; refuses a batch larger than the dataset."""
        if self.batch_size > examples:
            raise DpvipInputError(f"batch_size {self.batch_size} exceeds the {examples} training examples")
        return self.batch_size / examples

    def delta_for(self, examples: int) -> float:
        return self.delta if self.delta is not None else 1.0 / (2 * examples)


def warmup_then_constant(optimizer: torch.optim.Optimizer, warmup_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """lr * (s + 1) / W for the first W updates, then lr: the first update already moves
    (a warm-up from exactly 0 would spend a step of privacy budget on nothing)."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0
    )


def _micro_batches(classifier: Classifier, train, indices: np.ndarray, micro_batch: int, device: torch.device):
    """Forward passes over `train`'s examples at `indices`, one micro-batch loaded at a time
    (a paper-scale batch does not fit in memory)."""
    for start in range(0, len(indices), micro_batch):
        chunk = train.subset(indices[start : start + micro_batch])
        x, y = chunk.images.to(device), chunk.labels.to(device)
        yield lambda: F.cross_entropy(classifier(x), y, reduction="none")


def _summary(sizes: list[int], expected: float) -> dict:
    values = torch.tensor(sizes, dtype=torch.float64)
    return {
        "expected": expected,
        "mean": float(values.mean()),
        "std": float(values.std()) if len(sizes) > 1 else 0.0,
        "min": min(sizes),
        "max": max(sizes),
    }


def run_randomness(
    settings: DPFinetuneSettings, train, work_dir: str | Path | None, dist=None, identity: dict | None = None
) -> RunRandomness:
    """The noise and batches of a fine-tuning run on `train`: its secret key (for `work_dir`,
    in the key store), or its seed; one stream per settings, n, digest of the training data
    and the job's `identity` (its checkpoint's SHA-256), so a run on changed data or from
    another checkpoint never repeats the noise. Under several processes rank 0 makes the key
    first and the others only read it."""
    run = {"settings": asdict(settings), "examples": len(train), "data": train.digest(), "job": identity or {}}
    main = dist is None or dist.is_main
    if dist is not None and dist.world > 1:
        if main:
            RunRandomness.for_run(settings.randomness, work_dir, settings.seed, run)
        dist.barrier()
    return RunRandomness.for_run(settings.randomness, work_dir, settings.seed, run, create=main)


def train_dp_classifier(
    mae: MaskedAutoencoder,
    train,
    settings: DPFinetuneSettings,
    work_dir: JobState | str | Path | None = None,
    progress: bool = True,
    data: str | None = None,
) -> tuple[Classifier, dict]:
    """A copy of `mae` with a linear head, fine-tuned on `train` under DP-AdamW; returns it
    and what the run recorded (the privacy ledger w.r.t. `train`, realised batch sizes).
    `data`: the private dataset's name in the ledger (`DPStep`).
    `work_dir`: the run's private folder (or its JobState), whose secret key the key store keeps
    (secret randomness) and its state is saved every k steps and on SIGTERM; a rerun
    resumes it, ledger included. Under several processes (the JobState's `dist`) each rank
    takes its share of every Poisson batch, and the clipped sums meet before the noise."""
    settings.check()
    job = JobState.of(work_dir)
    dist = job.dist
    examples = len(train)
    if examples == 0:
        raise DpvipInputError("DP fine-tuning needs at least one training image")
    sample_rate = settings.sample_rate(examples)
    ledger = PrivacyLedger.for_noise(
        settings.accountant,
        sample_rate,
        settings.noise_multiplier,
        settings.steps,
        settings.delta_for(examples),
        settings.clip_norm,
    )
    device = next(mae.parameters()).device
    torch.manual_seed(settings.seed)  # the head's initialisation
    classifier = Classifier(copy.deepcopy(mae), train.classes, settings.features).train()
    clipper = ClippedGradientSum(classifier, settings.clip_norm)
    optimizer = make_optimizer("adamw", clipper.params, settings.lr, settings.weight_decay)
    scheduler = warmup_then_constant(optimizer, settings.warmup_steps)
    randomness = run_randomness(settings, train, job.folder, dist, job.identity)
    ranks = {"rank": dist.rank, "world": dist.world, "all_reduce": dist.sum_tensor} if dist is not None else {}
    large = settings.allow_large_delta
    dp_step = DPStep(clipper, optimizer, ledger, examples, randomness, allow_large_delta=large, data=data, **ranks)
    sizes, clipped, start = [], 0, 0
    # the state belongs to the run's key: a state left by a run whose key is gone is refused
    saved = job.loop("dp_finetune", {"settings": asdict(settings), "examples": examples, "key": randomness.identity()})
    try:
        with saved:
            # the ledger and optimizer first: a ledger of another mechanism is named as such
            state = saved.restore(check=lambda stored: dp_step.load_state_dict(stored, stored["step"], str(saved.path)))
            if state:
                classifier.load_state_dict(state["model"])
                scheduler.load_state_dict(state["scheduler"])
                sizes, clipped, start = list(state["batch_sizes"]), state["clipped"], state["step"]
            steps = range(start, settings.steps)
            for step in tqdm(
                steps,
                desc="DP fine-tuning",
                initial=start,
                total=settings.steps,
                disable=not (progress and job.is_main),
            ):
                # Indices only: nothing here draws per-example randomness (no augmentation).
                chosen = dp_step.batch(step)
                report = dp_step(step, _micro_batches(classifier, train, chosen, settings.micro_batch, device))
                scheduler.step()
                # the whole batch over ranks: its size and how many were clipped
                counts = torch.tensor([report.examples, report.clipped], dtype=torch.float64, device=device)
                if dist is not None:
                    dist.sum_tensor(counts)
                sizes.append(round(float(counts[0])))
                clipped += round(float(counts[1]))
                saved.after_step(
                    step + 1,
                    lambda: {
                        "model": classifier.state_dict(),
                        **dp_step.state_dict(),  # ledger and optimizer
                        "scheduler": scheduler.state_dict(),
                        "batch_sizes": sizes,
                        "clipped": clipped,
                    },
                    last=step + 1 == settings.steps,
                )
    finally:
        dp_step.close()
    record = {
        "privacy": dp_step.ledger.record() | {"examples": examples},
        "batch_sizes": _summary(sizes, settings.batch_size),
        "clipped_fraction": clipped / max(1, sum(sizes)),
    }
    return classifier, record


def dp_finetune(
    mae: MaskedAutoencoder,
    train,
    test,
    settings: DPFinetuneSettings,
    work_dir: JobState | str | Path | None = None,
    progress: bool = True,
    data: str | None = None,
) -> dict:
    """Fine-tune a copy of `mae` with a linear head on `train` under DP-AdamW and score it on
    `test` (LabelledImages or FolderImages): top-1 accuracy in percent, the privacy ledger
    (w.r.t. `train`), the realised batch sizes and the settings. `work_dir` as for
    `train_dp_classifier`; the saved state is cleared once the score exists."""
    job = JobState.of(work_dir)
    classifier, record = train_dp_classifier(mae, train, settings, job, progress, data)
    accuracy, per_example = classifier_score(classifier, test, dist=job.dist)
    job.clear_loop("dp_finetune")
    if job.is_main:
        release_key(job.folder)  # with its state: a rerun trains afresh with a new key
    return {
        "top1_percent": 100.0 * accuracy,
        PER_EXAMPLE: per_example,
        **record,
        "dataset": train.name,
        "test_examples": len(test),
        "settings": asdict(settings),
        "world_size": job.dist.world if job.dist is not None else 1,
    }
