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
floor(step * q) uses view min(epoch, views - 1). They are read a micro-batch at a time
(`dpvip.transfer.rows`: a cache's float16 memory maps, widened to float32 per batch), so host
memory holds one micro-batch of features, the head and its optimizer state, never a split.
A full-batch step sums the clipped gradients over its micro-batches in the order of the rows,
as it did when the features were one tensor in memory: the results are the same bits.

A run given a `LoopState` (`dpvip.train.resume`, its `run`) saves the head, the optimizer
and schedule, the batch sizes and the privacy ledger every k steps and on SIGTERM (also
inside a long step, between two micro-batches); rerun, it resumes from them, with the same
key, to the result of an uninterrupted run. The private probe keeps its state the same way
(`optimizer_state`, `restore_optimizer_state`).

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
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dpvip.errors import DpvipInputError
from dpvip.per_example import PER_EXAMPLE, correctness_record
from dpvip.privacy import ACCOUNTANTS, check_randomness
from dpvip.privacy.clipping import ClippedGradientSum
from dpvip.privacy.ledger import PrivacyLedger
from dpvip.privacy.optimizers import make_optimizer, set_gradients
from dpvip.privacy.randomness import RunRandomness
from dpvip.privacy.sampling import PoissonBatches
from dpvip.privacy.step import DPStep
from dpvip.train.resume import LoopState
from dpvip.transfer.rows import FeatureStream, Rows, as_rows, as_views

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
def features_shape(features) -> tuple[int, ...]:
    """The shape of a tensor, of rows (n, d), or of a list of views (views, n, d)."""
    if isinstance(features, (torch.Tensor, Rows)):
        return tuple(features.shape)
    shapes = {view.shape for view in features}
    if len(shapes) != 1:
        raise DpvipInputError(f"train views have different shapes {sorted(shapes)}")
    return (len(features), *shapes.pop())


def check_features(train, train_labels: torch.Tensor, test, test_labels: torch.Tensor, classes: int) -> None:
    """`train` (n, d) or (views, n, d) and `test` (n_test, d) of one width, labels in
    0..classes-1; tensors or rows (`dpvip.transfer.rows`)."""
    if int(classes) != classes or classes < 1:
        raise DpvipInputError(f"classes {classes} must be a positive integer")
    train_shape, test_shape = features_shape(train), features_shape(test)
    if len(test_shape) != 2 or len(train_shape) not in (2, 3):
        raise DpvipInputError(
            "features must be (views, n, d) or (n, d) for train and (n, d) for test, "
            f"not {train_shape} and {test_shape}"
        )
    if train_shape[-1] != test_shape[-1]:
        raise DpvipInputError(f"train features have width {train_shape[-1]}, test features {test_shape[-1]}")
    for split, shape, labels in (("train", train_shape, train_labels), ("test", test_shape, test_labels)):
        if labels.shape != (shape[-2],):
            raise DpvipInputError(f"{split}: {tuple(labels.shape)} labels for {shape[-2]} feature vectors")
        if shape[-2] == 0:
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


def _losses(layer: nn.Module, loss: Loss, read: Callable[[], tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Per-example losses of one micro-batch, read here: once this returns and the clipper has
    used the batch, nothing holds it."""
    x, y = read()
    return loss(layer(x), y)


def private_step(dp_step: DPStep, step: int, layer: nn.Module, stream: FeatureStream, loss: Loss) -> int:
    """One DP step of `layer` on the step's Poisson batch of the stream's rows (every row at
    q = 1), a micro-batch at a time; returns the realised batch size."""
    chosen = None if dp_step.full_batch else dp_step.batch(step)
    dp_step(step, (partial(_losses, layer, loss, read) for read in stream.readers(chosen)))
    return len(stream) if chosen is None else len(chosen)


def optimizer_state(dp_step: DPStep | None, optimizer: torch.optim.Optimizer) -> dict:
    """What a run's state keeps of the optimizer, and of a DP run its ledger (`DPStep.state_dict`)."""
    return dp_step.state_dict() if dp_step else {"optimizer": optimizer.state_dict(), "privacy": None}


def restore_optimizer_state(
    dp_step: DPStep | None, optimizer: torch.optim.Optimizer, restored: dict, state: LoopState
) -> None:
    """Back from `optimizer_state`'s record; a DP run's ledger is checked against its own."""
    if dp_step:
        dp_step.load_state_dict(restored, restored["step"], str(state.path))
    else:
        optimizer.load_state_dict(restored["optimizer"])


def _add_gradient(totals: list[torch.Tensor], layer: nn.Module, params, loss: Loss, read) -> int:
    x, y = read()
    for total, grad in zip(totals, torch.autograd.grad(loss(layer(x), y).sum(), params)):
        total += grad
    return len(y)


def mean_gradient_step(
    optimizer: torch.optim.Optimizer,
    layer: nn.Module,
    params: Sequence[nn.Parameter],
    stream: FeatureStream,
    chosen: np.ndarray | None,
    loss: Loss,
) -> None:
    """A step without privacy: the plain mean gradient of the chosen examples (all if None)."""
    totals, examples = [torch.zeros_like(p, dtype=torch.float32) for p in params], 0
    for read in stream.readers(chosen):
        examples += _add_gradient(totals, layer, params, loss, read)
    set_gradients(params, [total / max(1, examples) for total in totals])
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _score(layer: nn.Module, loss: Loss, read) -> tuple[torch.Tensor, float]:
    x, y = read()
    logits = layer(x)
    return (logits.argmax(1) == y).cpu(), float(loss(logits, y).sum())


@torch.no_grad()
def correctness(layer: nn.Module, stream: FeatureStream, loss: Loss) -> tuple[torch.Tensor, float]:
    """(whether `layer`'s top-1 prediction is right for each of the stream's rows, in order;
    the mean loss)."""
    parts, loss_sum = [], 0.0
    for read in stream.readers():
        right, total = _score(layer, loss, read)
        parts.append(right)
        loss_sum += total
    return (torch.cat(parts) if parts else torch.zeros(0, dtype=torch.bool)), loss_sum / len(stream)


def evaluate(layer: nn.Module, stream: FeatureStream, loss: Loss) -> tuple[float, float]:
    """(top-1 accuracy in percent, mean loss) of `layer` on the stream's rows."""
    correct, mean_loss = correctness(layer, stream, loss)
    return 100.0 * int(correct.sum()) / len(stream), mean_loss


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
    train,
    train_labels: torch.Tensor,
    classes: int,
    settings: HeadSettings,
    device: torch.device | str | None = None,
    randomness: RunRandomness | None = None,
    state: LoopState | None = None,
    progress: bool = False,
    data: str | None = None,
) -> tuple[nn.Linear, dict]:
    """Train the head on `device` (default: the features') on `train` ((views, n, d) or
    (n, d) tensor, or a list of rows per view: `dpvip.transfer.rows`, read a micro-batch at a
    time); returns it and what the run recorded (steps, sample rate, privacy ledger, realised
    batch sizes, final train loss; the device, torch's threads and the seconds the steps
    took). With `state` (entered), the run is saved every k steps and on SIGTERM, and resumes
    from what it holds: the head, optimizer, schedule, batch sizes and privacy ledger. `data`:
    the private dataset's name in the ledger (`DPStep`)."""
    settings.check()
    views = as_views(train)
    examples, width = views[0].shape
    q, steps = float(settings.batch_fraction), settings.steps
    ledger = None
    if settings.epsilon is not None:
        ledger = PrivacyLedger.calibrate(
            settings.accountant, q, steps, settings.epsilon, settings.delta, settings.clip_norm
        )
    device = torch.device(device) if device is not None else views[0].device
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
            data=data,
        )
        if ledger
        else None
    )
    sampler = PoissonBatches(examples, q, steps, randomness) if q < 1 and not ledger else None
    state = LoopState.of(state)  # not entered: SIGTERM keeps its default meaning
    streams = [
        FeatureStream(rows, train_labels, settings.micro_batch, device, stop=state.stop_requested) for rows in views
    ]
    first, sizes, seconds = 0, [], 0.0
    # the ledger and optimizer first: a ledger of another mechanism is named as such
    restored = state.restore(device, check=lambda saved: restore_optimizer_state(dp_step, optimizer, saved, state))
    if restored:
        head.load_state_dict(restored["head"])
        scheduler.load_state_dict(restored["scheduler"])
        first, sizes, seconds = restored["step"], list(restored["batch_sizes"]), restored["train_seconds"]

    def take_step(step: int) -> None:
        stream = streams[settings.view(step, views=len(views))]
        if dp_step:
            sizes.append(private_step(dp_step, step, head, stream, sigmoid_loss))
        else:
            chosen = sampler.indices(step) if sampler else None
            mean_gradient_step(optimizer, head, params, stream, chosen, sigmoid_loss)
            sizes.append(examples if chosen is None else len(chosen))
        scheduler.step()

    started = time.perf_counter()  # the steps alone: Mehta Table 10's throughput (no calibration, no evaluation)

    def snapshot() -> dict:
        return {
            "head": head.state_dict(),
            **optimizer_state(dp_step, optimizer),
            "scheduler": scheduler.state_dict(),
            "batch_sizes": list(sizes),
            "train_seconds": seconds + time.perf_counter() - started,
        }

    try:
        state.run(first, steps, take_step, snapshot, dp_step, "Mehta head", progress)
    finally:
        if dp_step:
            dp_step.close()
    train_seconds = seconds + time.perf_counter() - started
    last = FeatureStream(views[settings.view(steps - 1, len(views))], train_labels, settings.micro_batch, device)
    _, train_loss = evaluate(head, last, sigmoid_loss)
    privacy = (dp_step.ledger.record() | {"examples": examples}) if dp_step else None
    record = {"steps": steps, "sample_rate": q, "privacy": privacy, "batch_sizes": sizes, "train_loss": train_loss}
    # What the steps ran on: throughput per core needs the threads (CPU) or the device.
    hardware = {"device": device.type, "threads": torch.get_num_threads()}
    return head, record | hardware | {"train_seconds": train_seconds}


def train_head(
    train,
    train_labels: torch.Tensor,
    test,
    test_labels: torch.Tensor,
    classes: int,
    settings: HeadSettings,
    device: torch.device | str | None = None,
    randomness: RunRandomness | None = None,
    state: LoopState | None = None,
    progress: bool = False,
    validation: tuple | None = None,
    test_set: str = "test",
    data: str | None = None,
) -> dict:
    """Train a head on `train` (views, n, d) and score it on `test` (n_test, d): top-1
    accuracy in percent, each test example's correctness (`dpvip.per_example`, on the set
    named `test_set`), the run's record and its settings (JSON-able). Features are tensors
    or rows (`dpvip.transfer.rows`). `randomness`: the run's (a secret run needs it; a
    seeded one derives it from its settings); `state`: see `fit_head`. `validation`:
    (features (n_val, d), labels) held out of the training data, scored as test is
    ("validation_accuracy"): what the learning rate is chosen on (`dpvip.selection`).
    `data`: the private dataset's name in the ledger (`DPStep`)."""
    started = time.perf_counter()
    settings.check()
    views = as_views(train)
    check_features(views, train_labels, test, test_labels, classes)
    if validation is not None:
        check_features(views, train_labels, *validation, classes)
    head, record = fit_head(views, train_labels, classes, settings, device, randomness, state, progress, data)
    device = next(head.parameters()).device
    scored = FeatureStream(as_rows(test), test_labels, settings.micro_batch, device)
    correct, _ = correctness(head, scored, sigmoid_loss)
    accuracy = 100.0 * int(correct.sum()) / len(test_labels)
    if validation is not None:
        held, held_labels = validation
        scored, _ = evaluate(
            head, FeatureStream(as_rows(held), held_labels, settings.micro_batch, device), sigmoid_loss
        )
        record |= {"validation_accuracy": scored, "validation_examples": len(held_labels)}
    return {
        "accuracy": accuracy,
        **record,
        PER_EXAMPLE: correctness_record(correct.numpy(), test_set, test_labels.numpy()),
        "settings": asdict(settings),
        "seconds": time.perf_counter() - started,
    }
