"""DP-RandP's private linear probing (Tang et al., Appendix F/G, Tables 4, 5, 22, 23): a
bias-free linear layer, from zero, trained by full-batch DP gradient descent on frozen
features.

Every step uses every example (q = 1): per-example softmax cross-entropy gradients are
clipped to C, N(0, (sigma_2 C)^2) is added to their sum, which is divided by n, and SGD
with momentum steps at a constant lr, T times. For ImageNet the paper first scales every
feature vector to L2 norm `feature_norm` (a per-example map: no privacy cost) and centres
train and test features on a PRIVATE mean of the train features: their mean plus
N(0, (sigma_1 C_f / n)^2) per coordinate, the Gaussian mechanism on the sum (sensitivity
C_f) divided by the public n, as DP-SGD divides its noisy sum.

Full-batch Gaussian mechanisms compose exactly as Gaussian DP: the run is mu-GDP with
mu = sqrt(1 / sigma_1^2 + T / sigma_2^2), and (epsilon, delta) is mu's analytic-Gaussian
curve. Given epsilon, mu follows, then sigma_2 = sqrt(1 / r^2 + T) / mu and sigma_1 = r sigma_2
for the ratio r = sigma_1 / sigma_2 (sigma_2 = sqrt(T) / mu without centring); given
sigma_2 (the paper's tables), epsilon follows.

Not stated by the paper: the clip norm C of the gradient steps; we use 1, its DP-SGD default.

Memory. The features are read a micro-batch of m rows at a time (`dpvip.transfer.rows`: the
cache's float16 memory maps, widened to float32 per batch, normalised and centred in place),
so host memory does not grow with n. A full-batch step sums the clipped gradients of its
micro-batches in row order, as it did on one in-memory tensor (the same bits); the private
mean sums float64 micro-batch sums, which moves the sum in its last float64 bits only (see
`streamed_private_mean`). The ImageNet blocks4 probe (d = 36,864, n = 1,281,167, 1,000
classes, m = 65,536, the default) holds at most, per step:
- the micro-batch, m x d x 4 B = 9.66 GB (the one resident copy: read, prepared and used in place);
- its logits side (logits, log-softmax, their gradients, the scaled backprops), at most
  5 x m x 1,000 x 4 B = 1.31 GB;
- the probe and its state (weights, clipped sum, noisy gradient, momentum, an optimizer
  temporary), 5 x 1,000 x d x 4 B = 0.74 GB;
- one memory-map block in flight, 64 MiB = 0.07 GB; the labels, n x 8 B = 0.01 GB;
- the process itself (Python, torch, opacus), 0.66 GB measured;
in all 12.45 GB <= 16 GB. The centring pass holds 3,640 rows in float32 and float64 (1.61 GB),
the test evaluation 50,000 rows (7.37 GB): both less than a step. Measured on CPU at d = 36,864
and 1,000 classes (n = 6,144), the peak above the process was 0.96 GB at m = 2,048 and
1.62 GB at m = 6,144 against 1.15 GB and 1.83 GB by the terms above; extrapolated to
m = 65,536, 11.8 GB with the process. On a GPU the host holds a micro-batch only on its way
there, as stored (float16, 4.83 GB), and the rest lives on the device.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import torch
from torch import nn

from dpvip.errors import DpvipInputError
from dpvip.per_example import PER_EXAMPLE, correctness_record
from dpvip.privacy import check_randomness, gaussian
from dpvip.privacy.clipping import ClippedGradientSum
from dpvip.privacy.ledger import PrivacyLedger
from dpvip.privacy.noise import NoiseStream, gaussian_noise, noise_stream
from dpvip.privacy.optimizers import make_optimizer
from dpvip.privacy.step import DPStep
from dpvip.privacy.randomness import RunRandomness
from dpvip.transfer.head import (
    check_features,
    correctness,
    mean_gradient_step,
    optimizer_state,
    private_step,
    restore_optimizer_state,
    softmax_loss,
)
from dpvip.train.resume import LoopState, StepInterrupted
from dpvip.transfer.rows import FeatureStream, as_rows

ACCOUNTANT = "gdp (exact, full batch)"
CENTRE = "centre"  # the private mean's noise stream, never a step's
CLIP_MARGIN = 1 - 1e-12  # the private mean clips rows to this share of C_f (float64 rounding)
STATISTICS_BYTES = 1 << 30  # bound on a micro-batch's float64 copy while the private mean is summed


@dataclass(frozen=True)
class PrivateProbeSettings:
    epsilon: float | None  # None (and no noise_multiplier): without privacy
    delta: float
    steps: int = 100
    lr: float = 10.0
    momentum: float = 0.9
    clip_norm: float = 1.0  # not stated by the paper: its DP-SGD default
    feature_norm: float | None = None  # ImageNet: 50; None: features as they are (CIFAR)
    sigma_ratio: float | None = None  # sigma_1 / sigma_2: centre on a private mean; None: no centring
    noise_multiplier: float | None = None  # sigma_2 given (the paper's tables); None: calibrated to epsilon
    seed: int = 0
    randomness: str = "secret"  # privacy.randomness: secret, or seeded (reproducible, NOT private)
    allow_large_delta: bool = False  # privacy.allow_large_delta: run with delta >= 1/n
    micro_batch: int = 65536  # rows per forward/backward: bounds memory, not the result

    @property
    def private(self) -> bool:
        return self.epsilon is not None or self.noise_multiplier is not None

    def check(self) -> None:
        check_randomness(self.randomness)
        if self.epsilon is not None and self.noise_multiplier is not None:
            raise DpvipInputError(
                f"give epsilon ({self.epsilon}) or noise_multiplier ({self.noise_multiplier}), not both: "
                "one determines the other"
            )
        if self.epsilon is not None and not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise DpvipInputError(f"epsilon {self.epsilon} must be positive and finite (None trains without privacy)")
        if self.noise_multiplier is not None and not (
            self.noise_multiplier > 0 and math.isfinite(self.noise_multiplier)
        ):
            raise DpvipInputError(f"noise_multiplier {self.noise_multiplier} must be positive and finite")
        if not 0 < self.delta < 1:
            raise DpvipInputError(f"delta {self.delta} is outside (0, 1)")
        if int(self.steps) != self.steps or self.steps < 1:
            raise DpvipInputError(f"steps {self.steps} must be a positive integer")
        if not self.lr > 0:
            raise DpvipInputError(f"lr {self.lr} must be positive")
        if not 0 <= self.momentum < 1:
            raise DpvipInputError(f"momentum {self.momentum} is outside [0, 1)")
        if not self.clip_norm > 0:
            raise DpvipInputError(f"clip_norm {self.clip_norm} must be positive")
        if self.feature_norm is not None and not self.feature_norm > 0:
            raise DpvipInputError(f"feature_norm {self.feature_norm} must be positive")
        if self.sigma_ratio is not None and not (self.sigma_ratio > 0 and math.isfinite(self.sigma_ratio)):
            raise DpvipInputError(f"sigma_ratio {self.sigma_ratio} must be positive and finite")
        if self.sigma_ratio is not None and self.feature_norm is None:
            raise DpvipInputError(
                f"sigma_ratio {self.sigma_ratio} centres on a private mean, "
                "which needs feature_norm to bound each feature vector"
            )
        if int(self.micro_batch) != self.micro_batch or self.micro_batch < 1:
            raise DpvipInputError(f"micro_batch {self.micro_batch} must be a positive integer")


def normalise(features: torch.Tensor, feature_norm: float) -> torch.Tensor:
    """Every row scaled to L2 norm `feature_norm` (a zero row stays zero), in fp32."""
    return normalise_(features.to(torch.float32, copy=True), feature_norm)


def normalise_(features: torch.Tensor, feature_norm: float) -> torch.Tensor:
    """`normalise` in place on an fp32 batch (the same products, so the same bits)."""
    return features.mul_(feature_norm / torch.linalg.vector_norm(features, dim=1, keepdim=True).clamp(min=1e-12))


def clipped_row_sum(features: torch.Tensor, feature_norm: float) -> torch.Tensor:
    """The sum, in float64, of the rows each clipped to a hair under L2 norm `feature_norm`
    (see `private_mean`)."""
    rows = features.to(torch.float64, copy=True)
    norms = torch.linalg.vector_norm(rows, dim=1, keepdim=True)
    return rows.mul_((feature_norm * CLIP_MARGIN / norms.clamp(min=1e-300)).clamp(max=1.0)).sum(0)


def noisy_mean(
    total: torch.Tensor, examples: int, feature_norm: float, sigma: float, noise: NoiseStream | None
) -> torch.Tensor:
    """(total + N(0, (sigma * feature_norm)^2) per coordinate) / examples, in fp32."""
    if sigma > 0:
        total = total + gaussian_noise(total.shape, sigma * feature_norm, noise).double()
    return (total / examples).float()


def private_mean(features: torch.Tensor, feature_norm: float, sigma: float, noise: NoiseStream | None) -> torch.Tensor:
    """The rows' mean + N(0, (sigma * feature_norm / n)^2) per coordinate: the Gaussian
    mechanism on the sum of the rows, each first clipped to L2 norm `feature_norm`, divided
    by the public n. Clipped in float64 to a hair under `feature_norm` (rows the caller
    normalised to it lose nothing measurable), so no row's norm exceeds it after rounding and
    the sum's sensitivity is `feature_norm`, not a rounding above it."""
    return noisy_mean(clipped_row_sum(features, feature_norm), features.shape[0], feature_norm, sigma, noise)


def streamed_private_mean(
    stream: FeatureStream, feature_norm: float, sigma: float, noise: NoiseStream | None
) -> torch.Tensor:
    """`private_mean` of the stream's (prepared) rows, read a micro-batch at a time: the
    float64 sums of the micro-batches are added in order. With one micro-batch this is
    `private_mean`'s sum exactly; with several, the additions are grouped otherwise, which
    can move the float64 sum in its last bits (about 1e-16 relative) and, very rarely, the
    float32 mean by one unit in its last place."""
    total = None
    for read in stream.readers():
        part = _row_sum(read, feature_norm)
        total = part if total is None else total + part
    return noisy_mean(total, len(stream), feature_norm, sigma, noise)


def _row_sum(read, feature_norm: float) -> torch.Tensor:
    features, _ = read()
    return clipped_row_sum(features, feature_norm)


def composed_mu(sigma_mean: float | None, sigma_sgd: float, steps: int) -> float:
    """mu of a private mean (sigma_mean; None: none) and `steps` full-batch gradient steps
    (sigma_sgd), composed exactly as Gaussian DP."""
    return gaussian.composed_mu([(sigma_sgd, steps)] + ([(sigma_mean, 1)] if sigma_mean is not None else []))


def composed_epsilon(sigma_mean: float | None, sigma_sgd: float, steps: int, delta: float) -> float:
    """Epsilon at `delta` of the same composition."""
    return gaussian.epsilon_for_delta(composed_mu(sigma_mean, sigma_sgd, steps), delta)


def calibrate(settings: PrivateProbeSettings) -> dict:
    """sigma_1 (None without centring) and sigma_2 of a private run, its mu and epsilon."""
    settings.check()
    if not settings.private:
        raise DpvipInputError("a run without privacy (epsilon and noise_multiplier None) has no noise to calibrate")
    ratio, steps = settings.sigma_ratio, settings.steps
    if settings.noise_multiplier is not None:
        sigma_sgd = float(settings.noise_multiplier)
    else:
        try:
            mu = gaussian.mu_for_epsilon(settings.epsilon, settings.delta)
        except ValueError as err:
            raise DpvipInputError(
                f"epsilon {settings.epsilon} at delta {settings.delta} is out of reach of any Gaussian noise"
            ) from err
        sigma_sgd = math.sqrt((1 / ratio**2 if ratio else 0.0) + steps) / mu
    sigma_mean = ratio * sigma_sgd if ratio else None
    mu = composed_mu(sigma_mean, sigma_sgd, steps)
    return {
        "sigma_mean": sigma_mean,
        "sigma_sgd": sigma_sgd,
        "mu": mu,
        "epsilon": gaussian.epsilon_for_delta(mu, settings.delta),
        "delta": settings.delta,
    }


def sgd_ledger(settings: PrivateProbeSettings, privacy: dict) -> PrivacyLedger:
    """The ledger of the full-batch gradient steps (sigma_2): it counts them and gives the
    step its noise (pld accounts q = 1 exactly). The run reports the epsilon of these steps
    composed with the private mean (`privacy`), which is its budget here."""
    return PrivacyLedger(
        "pld", 1.0, privacy["sigma_sgd"], settings.clip_norm, settings.delta, privacy["epsilon"], settings.steps
    )


@dataclass
class ProbeInputs:
    """What the probe sees of a batch of raw features (fp32, on its device, changed in place):
    rows scaled to `feature_norm` (None: as they are), then the private `mean` subtracted
    (None: not centred). Train and test batches go through the same map."""

    feature_norm: float | None = None
    mean: torch.Tensor | None = None

    def __call__(self, features: torch.Tensor) -> torch.Tensor:
        if self.feature_norm is not None:
            normalise_(features, self.feature_norm)
        if self.mean is not None:
            features.sub_(self.mean)
        return features


def statistics_rows(settings: PrivateProbeSettings, width: int) -> int:
    """Rows per micro-batch of the centring statistics: the run's micro-batch, fewer when
    their float64 copy would pass STATISTICS_BYTES (ImageNet blocks4: 3,640 rows)."""
    return max(1, min(int(settings.micro_batch), STATISTICS_BYTES // (8 * width)))


def fit_probe(
    train,
    train_labels: torch.Tensor,
    test,
    classes: int,
    settings: PrivateProbeSettings,
    randomness: RunRandomness | None = None,
    device: torch.device | str | None = None,
    state: LoopState | None = None,
    progress: bool = False,
    data: str | None = None,
) -> tuple[nn.Linear, ProbeInputs, dict | None]:
    """Train the probe on `train` ((n, d) tensor or rows, `dpvip.transfer.rows`, read a
    micro-batch at a time) on `device` (default: the features'); returns it, the map of raw
    feature batches to its inputs (`ProbeInputs`: normalised, centred on the same private
    mean; for `test` and any other split) and the privacy record (None without).
    `randomness`: the run's (a secret run needs it; a seeded one derives it from its
    settings). With `state` (entered), the run is saved every k steps and on SIGTERM and
    resumes from what it holds: the probe, its momentum, the private mean and the ledger.
    `test` is not read here (the caller scores the probe on it). `data`: the private
    dataset's name in the privacy record and the ledger (`DPStep`)."""
    settings.check()
    rows = as_rows(train)
    examples, width = rows.shape
    device = torch.device(device) if device is not None else rows.device
    privacy = None
    if settings.private:
        privacy = calibrate(settings) | {
            "steps": settings.steps,
            "accountant": ACCOUNTANT,
            "clip_norm": settings.clip_norm,
            "feature_norm": settings.feature_norm,
            "examples": examples,
        }
    if privacy and randomness is None:  # `seeded` settings; `secret` needs the job's key (refused here)
        randomness = RunRandomness.for_settings(settings)
    if privacy:  # its own record (not a ledger): steps, data and run as a ledger names them
        privacy |= randomness.record() | {"steps": settings.steps, "data": data, "run": randomness.identity()}
    state = LoopState.of(state)  # not entered: SIGTERM keeps its default meaning
    stop = state.stop_requested
    probe = nn.Linear(width, classes, bias=False, device=device)
    nn.init.zeros_(probe.weight)
    params = [probe.weight]
    optimizer = make_optimizer("sgd", params, settings.lr, momentum=settings.momentum)
    dp_step = (
        DPStep(
            ClippedGradientSum(probe, settings.clip_norm),
            optimizer,
            sgd_ledger(settings, privacy),
            examples,
            randomness,
            allow_large_delta=settings.allow_large_delta,
            data=data,
        )
        if privacy
        else None
    )
    # the ledger and momentum first: a ledger of another mechanism is named as such
    restored = state.restore(device, check=lambda saved: restore_optimizer_state(dp_step, optimizer, saved, state))
    inputs = ProbeInputs(settings.feature_norm)
    if restored:
        inputs.mean = restored["mean"]
    elif settings.sigma_ratio is not None:
        sigma = privacy["sigma_mean"] if privacy else 0.0
        centre_noise = noise_stream(randomness, 0, device, CENTRE) if privacy else None
        raw = FeatureStream(rows, train_labels, statistics_rows(settings, width), device, inputs, stop)
        try:
            inputs.mean = streamed_private_mean(raw, settings.feature_norm, sigma, centre_noise)
        except StepInterrupted:
            raise SystemExit("stopped by SIGTERM while centring, before the first step (nothing to save)") from None
    first = 0
    if restored:
        probe.load_state_dict(restored["probe"])
        first = restored["step"]
    stream = FeatureStream(rows, train_labels, settings.micro_batch, device, inputs, stop)

    def take_step(step: int) -> None:
        if dp_step:
            private_step(dp_step, step, probe, stream, softmax_loss)
        else:
            mean_gradient_step(optimizer, probe, params, stream, None, softmax_loss)

    def snapshot() -> dict:
        return {
            "probe": probe.state_dict(),
            **optimizer_state(dp_step, optimizer),
            "mean": inputs.mean,
        }

    try:
        state.run(first, settings.steps, take_step, snapshot, dp_step, "private probe", progress)
    finally:
        if dp_step:
            dp_step.close()
    return probe, inputs, privacy


def train_probe(
    train,
    train_labels: torch.Tensor,
    test,
    test_labels: torch.Tensor,
    classes: int,
    settings: PrivateProbeSettings,
    randomness: RunRandomness | None = None,
    device: torch.device | str | None = None,
    state: LoopState | None = None,
    progress: bool = False,
    test_set: str = "test",
    data: str | None = None,
) -> dict:
    """Private linear probing on `train` (n, d), scored on `test` (n_test, d), tensors or
    rows: top-1 accuracy in percent, each test example's correctness (`dpvip.per_example`,
    on the set named `test_set`), the privacy record, the settings (JSON-able).
    `randomness`, `device`, `state`, `data`: see `fit_probe`."""
    started = time.perf_counter()
    settings.check()
    if isinstance(train, torch.Tensor) and train.ndim != 2:
        raise DpvipInputError(f"probe train features must be (n, d), not {tuple(train.shape)}")
    check_features(train, train_labels, test, test_labels, classes)
    probe, inputs, privacy = fit_probe(
        train, train_labels, test, classes, settings, randomness, device, state, progress, data
    )
    scored = FeatureStream(as_rows(test), test_labels, settings.micro_batch, probe.weight.device, inputs)
    correct, _ = correctness(probe, scored, softmax_loss)
    return {
        "accuracy": 100.0 * int(correct.sum()) / len(test_labels),
        PER_EXAMPLE: correctness_record(correct.numpy(), test_set, test_labels.numpy()),
        "steps": settings.steps,
        "privacy": privacy,
        "settings": asdict(settings),
        "seconds": time.perf_counter() - started,
    }
