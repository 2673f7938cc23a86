"""Mehta et al. (TMLR 2023), last-layer DP fine-tuning: a linear head trained under DP on a
frozen backbone's cached features, with the repository's DP engine.

The head is `nn.Linear(d, classes)` with its bias fixed at -10 (not trained: the authors'
released code fixes it; Scenic's default) and its weights zero by default (`init_scale`
gives N(0, (init_scale / sqrt(d))^2), 1 = LeCun normal). The loss is one-vs-all sigmoid
cross-entropy, summed over classes per example. A private step is `dpvip.privacy.step`'s,
as everywhere in the repository: the ledger is charged first, a Poisson batch is drawn (every
example at q = 1), per-example gradients are clipped to C and summed over micro-batches,
N(0, sigma^2 C^2) is added once and the sum divided by the expected batch q * n, and the
optimizer steps. A full-batch run under prv or pld is accounted as the exact Gaussian
mechanism. Without privacy (epsilon None) the step is the plain mean gradient of the
realised batch, sampled the same way.

The train features are (views, n, d): view v is the augmented copy of epoch v, and epoch
floor(step * q) uses view min(epoch, views - 1).

LAMB is optax's, which Mehta et al.'s JAX code used (`make_optimizer`): the trust ratio
||w|| / ||update|| on every parameter and no global gradient clipping; from zero weights
the ratio is 1 and the first step is Adam's, a sign step (Mehta et al.).

`train_loss` is a diagnostic computed on the training features at the end; it is not
privatised.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dpvip.errors import DpvipInputError
from dpvip.privacy import ACCOUNTANTS, check_randomness
from dpvip.privacy.clipping import ClippedGradientSum
from dpvip.privacy.ledger import PrivacyLedger
from dpvip.privacy.optimizers import make_optimizer, set_gradients
from dpvip.privacy.randomness import RunRandomness
from dpvip.privacy.sampling import PoissonBatches
from dpvip.privacy.step import DPStep

HEAD_OPTIMIZERS = ("sgd", "adam", "lamb")
SCHEDULES = ("constant", "cosine", "linear")

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (logits, labels) -> per-example losses


@dataclass(frozen=True)
class HeadSettings:
    optimizer: str = "lamb"  # sgd (momentum) | adam | lamb
    lr: float = 1e-3
    batch_fraction: float = 1.0  # q: expected batch q * n; 1.0 = every example every step
    epochs: float = 1.0  # steps = max(1, round(epochs / q))
    epsilon: float | None = 10.0  # None: without privacy
    delta: float = 1e-6
    clip_norm: float = 1.0
    accountant: str = "prv"
    init_scale: float = 0.0  # weights ~ N(0, (init_scale / sqrt(d))^2); 0 = zero init
    bias_init: float = -10.0  # fixed, not trained
    schedule: str = "constant"  # after the warm-up: constant | cosine | linear decay
    warmup_epochs: float = 0.0
    momentum: float = 0.9  # SGD's
    seed: int = 0
    randomness: str = "secret"  # privacy.randomness: secret, or seeded (reproducible, NOT private)
    allow_large_delta: bool = False  # privacy.allow_large_delta: run with delta >= 1/n
    micro_batch: int = 65536  # rows per forward/backward: bounds memory, not the result

    def check(self) -> None:
        check_randomness(self.randomness)
        if not 0 < self.batch_fraction <= 1:
            raise DpvipInputError(f"batch_fraction {self.batch_fraction} is outside (0, 1]")
        if not (self.epochs > 0 and math.isfinite(self.epochs)):
            raise DpvipInputError(f"epochs {self.epochs} must be positive and finite")
        if self.epsilon is not None and not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise DpvipInputError(f"epsilon {self.epsilon} must be positive and finite (None trains without privacy)")
        if not 0 < self.delta < 1:
            raise DpvipInputError(f"delta {self.delta} is outside (0, 1)")
        if not self.clip_norm > 0:
            raise DpvipInputError(f"clip_norm {self.clip_norm} must be positive")
        if not self.lr > 0:
            raise DpvipInputError(f"lr {self.lr} must be positive")
        if self.optimizer not in HEAD_OPTIMIZERS:
            raise DpvipInputError(f"optimizer '{self.optimizer}' is not one of {', '.join(HEAD_OPTIMIZERS)}")
        if self.schedule not in SCHEDULES:
            raise DpvipInputError(f"schedule '{self.schedule}' is not one of {', '.join(SCHEDULES)}")
        if self.accountant not in ACCOUNTANTS:
            raise DpvipInputError(f"accountant '{self.accountant}' is not one of {', '.join(ACCOUNTANTS)}")
        if not self.warmup_epochs >= 0:
            raise DpvipInputError(f"warmup_epochs {self.warmup_epochs} must not be negative")
        if not 0 <= self.momentum < 1:
            raise DpvipInputError(f"momentum {self.momentum} is outside [0, 1)")
        if not self.init_scale >= 0:
            raise DpvipInputError(f"init_scale {self.init_scale} must not be negative")
        if int(self.micro_batch) != self.micro_batch or self.micro_batch < 1:
            raise DpvipInputError(f"micro_batch {self.micro_batch} must be a positive integer")

    @property
    def steps(self) -> int:
        return max(1, round(self.epochs / self.batch_fraction))

    @property
    def warmup_steps(self) -> int:
        return round(self.warmup_epochs / self.batch_fraction)

    def view(self, step: int, views: int) -> int:
        """The train view of `step`: its epoch floor(step * q), at most the last view."""
        return min(math.floor(step * self.batch_fraction + 1e-9), views - 1)


# --- checks shared with private_probe --------------------------------------------------------
def check_features(
    train: torch.Tensor, train_labels: torch.Tensor, test: torch.Tensor, test_labels: torch.Tensor, classes: int
) -> None:
    """`train` (n, d) or (views, n, d) and `test` (n_test, d) of one width, labels in 0..classes-1."""
    if int(classes) != classes or classes < 1:
        raise DpvipInputError(f"classes {classes} must be a positive integer")
    if test.ndim != 2 or train.ndim not in (2, 3):
        raise DpvipInputError(
            "features must be (views, n, d) or (n, d) for train and (n, d) for test, "
            f"not {tuple(train.shape)} and {tuple(test.shape)}"
        )
    if train.shape[-1] != test.shape[-1]:
        raise DpvipInputError(f"train features have width {train.shape[-1]}, test features {test.shape[-1]}")
    for split, features, labels in (("train", train, train_labels), ("test", test, test_labels)):
        if labels.shape != (features.shape[-2],):
            raise DpvipInputError(f"{split}: {tuple(labels.shape)} labels for {features.shape[-2]} feature vectors")
        if features.shape[-2] == 0:
            raise DpvipInputError(f"{split}: no feature vectors")
        low, high = int(labels.min()), int(labels.max())
        if low < 0 or high >= classes:
            raise DpvipInputError(f"{split} label {low if low < 0 else high} is outside 0..{classes - 1}")


# --- the pieces of a step, shared with private_probe -----------------------------------------
def sigmoid_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """One-vs-all sigmoid cross-entropy against one-hot labels, summed over classes, per example."""
    targets = F.one_hot(labels, logits.shape[1]).to(logits.dtype)
    return F.binary_cross_entropy_with_logits(logits, targets, reduction="none").sum(1)


def softmax_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, labels, reduction="none")


def _chunks(
    features: torch.Tensor, labels: torch.Tensor, chosen: np.ndarray | None, micro_batch: int, device: torch.device
):
    """(x, y) micro-batches of the chosen rows (all rows if `chosen` is None), in fp32 on
    `device`: the features may stay in host memory (ImageNet x views) while the head trains
    on a GPU."""
    rows = features.shape[0] if chosen is None else len(chosen)
    for start in range(0, rows, micro_batch):
        if chosen is None:
            x, y = features[start : start + micro_batch], labels[start : start + micro_batch]
        else:
            index = torch.from_numpy(chosen[start : start + micro_batch]).to(features.device)
            x, y = features[index], labels[index]
        yield x.to(device, torch.float32), y.to(device, torch.long)


def private_step(
    dp_step: DPStep,
    step: int,
    layer: nn.Module,
    features: torch.Tensor,
    labels: torch.Tensor,
    loss: Loss,
    micro_batch: int,
) -> int:
    """One DP step of `layer` on the step's Poisson batch of (features, labels) (every row at
    q = 1, without copying them); returns the realised batch size."""
    chosen = None if dp_step.full_batch else dp_step.batch(step)
    chunks = _chunks(features, labels, chosen, micro_batch, dp_step.clipper.sums[0].device)
    dp_step(step, (lambda x=x, y=y: loss(layer(x), y) for x, y in chunks))
    return features.shape[0] if chosen is None else len(chosen)


def mean_gradient_step(
    optimizer: torch.optim.Optimizer,
    layer: nn.Module,
    params: Sequence[nn.Parameter],
    features: torch.Tensor,
    labels: torch.Tensor,
    chosen: np.ndarray | None,
    loss: Loss,
    micro_batch: int,
) -> None:
    """A step without privacy: the plain mean gradient of the chosen examples (all if None)."""
    totals, examples = [torch.zeros_like(p, dtype=torch.float32) for p in params], 0
    for x, y in _chunks(features, labels, chosen, micro_batch, params[0].device):
        for total, grad in zip(totals, torch.autograd.grad(loss(layer(x), y).sum(), params)):
            total += grad
        examples += len(y)
    set_gradients(params, [total / max(1, examples) for total in totals])
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


@torch.no_grad()
def evaluate(
    layer: nn.Module, features: torch.Tensor, labels: torch.Tensor, loss: Loss, micro_batch: int
) -> tuple[float, float]:
    """(top-1 accuracy in percent, mean loss) of `layer` on (features, labels)."""
    correct, loss_sum = 0, 0.0
    for x, y in _chunks(features, labels, None, micro_batch, next(layer.parameters()).device):
        logits = layer(x)
        correct += int((logits.argmax(1) == y).sum())
        loss_sum += float(loss(logits, y).sum())
    return 100.0 * correct / len(labels), loss_sum / len(labels)


# --- the head --------------------------------------------------------------------------------
def make_head(width: int, classes: int, settings: HeadSettings, device: torch.device | str = "cpu") -> nn.Linear:
    """Linear(width, classes): weights N(0, (init_scale / sqrt(width))^2) from the run's seed
    (zero at init_scale 0), the bias filled with bias_init and frozen."""
    head = nn.Linear(width, classes, device=device)
    with torch.no_grad():
        if settings.init_scale > 0:
            generator = torch.Generator().manual_seed(settings.seed)
            head.weight.copy_(
                torch.randn(classes, width, generator=generator) * (settings.init_scale / math.sqrt(width))
            )
        else:
            head.weight.zero_()
        head.bias.fill_(settings.bias_init)
    head.bias.requires_grad_(False)
    return head


def head_optimizer(settings: HeadSettings, params: Sequence[nn.Parameter]) -> torch.optim.Optimizer:
    return make_optimizer(settings.optimizer, params, settings.lr, momentum=settings.momentum)


def lr_factor(step: int, steps: int, warmup: int, schedule: str) -> float:
    """The lr multiplier of update `step` (from 0): (step + 1) / W during a warm-up of W
    updates (the first update already moves), then constant, or a cosine or linear decay
    from 1 over the remaining updates."""
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = (step - warmup) / max(1, steps - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * progress)) if schedule == "cosine" else 1.0 - progress


def fit_head(
    train: torch.Tensor,
    train_labels: torch.Tensor,
    classes: int,
    settings: HeadSettings,
    device: torch.device | str | None = None,
    randomness: RunRandomness | None = None,
) -> tuple[nn.Linear, dict]:
    """Train the head on `device` (default: the features') on `train` (views, n, d); returns
    it and what the run recorded (steps, sample rate, privacy ledger, realised batch sizes,
    final train loss; the device, torch's threads and the seconds the steps took)."""
    settings.check()
    views, examples, width = train.shape
    q, steps = float(settings.batch_fraction), settings.steps
    ledger = None
    if settings.epsilon is not None:
        ledger = PrivacyLedger.calibrate(
            settings.accountant, q, steps, settings.epsilon, settings.delta, settings.clip_norm
        )
    device = torch.device(device) if device is not None else train.device
    head = make_head(width, classes, settings, device)
    params = [p for p in head.parameters() if p.requires_grad]
    optimizer = head_optimizer(settings, params)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, steps, settings.warmup_steps, settings.schedule)
    )
    if randomness is None and ledger is None:  # without privacy nothing is kept secret
        randomness = RunRandomness.seeded(settings.seed).child(asdict(settings))
    elif randomness is None:  # `seeded` settings; `secret` needs the job's key (refused here)
        randomness = RunRandomness.for_settings(settings)
    dp_step = (
        DPStep(
            ClippedGradientSum(head, settings.clip_norm),
            optimizer,
            ledger,
            examples,
            randomness,
            allow_large_delta=settings.allow_large_delta,
        )
        if ledger
        else None
    )
    sampler = PoissonBatches(examples, q, steps, randomness) if q < 1 and not ledger else None
    sizes = []
    started = time.perf_counter()  # the steps alone: Mehta Table 10's throughput (no calibration, no evaluation)
    try:
        for step in range(steps):
            features = train[settings.view(step, views)]
            if dp_step:
                sizes.append(
                    private_step(dp_step, step, head, features, train_labels, sigmoid_loss, settings.micro_batch)
                )
            else:
                chosen = sampler.indices(step) if sampler else None
                mean_gradient_step(
                    optimizer, head, params, features, train_labels, chosen, sigmoid_loss, settings.micro_batch
                )
                sizes.append(examples if chosen is None else len(chosen))
            scheduler.step()
    finally:
        if dp_step:
            dp_step.clipper.close()
    train_seconds = time.perf_counter() - started
    _, train_loss = evaluate(
        head, train[settings.view(steps - 1, views)], train_labels, sigmoid_loss, settings.micro_batch
    )
    privacy = (dp_step.ledger.record() | {"examples": examples}) if dp_step else None
    record = {"steps": steps, "sample_rate": q, "privacy": privacy, "batch_sizes": sizes, "train_loss": train_loss}
    # What the steps ran on: throughput per core needs the threads (CPU) or the device.
    hardware = {"device": device.type, "threads": torch.get_num_threads()}
    return head, record | hardware | {"train_seconds": train_seconds}


def train_head(
    train: torch.Tensor,
    train_labels: torch.Tensor,
    test: torch.Tensor,
    test_labels: torch.Tensor,
    classes: int,
    settings: HeadSettings,
    device: torch.device | str | None = None,
    randomness: RunRandomness | None = None,
) -> dict:
    """Train a head on `train` (views, n, d) and score it on `test` (n_test, d): top-1
    accuracy in percent, the run's record and its settings (JSON-able). `randomness`: the
    run's (a secret run needs it; a seeded one derives it from its settings)."""
    started = time.perf_counter()
    settings.check()
    if train.ndim == 2:
        train = train[None]
    check_features(train, train_labels, test, test_labels, classes)
    head, record = fit_head(train, train_labels, classes, settings, device, randomness)
    accuracy, _ = evaluate(head, test, test_labels, sigmoid_loss, settings.micro_batch)
    return {"accuracy": accuracy, **record, "settings": asdict(settings), "seconds": time.perf_counter() - started}
