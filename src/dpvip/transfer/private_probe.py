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
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import torch
from torch import nn

from dpvip.errors import DpvipInputError
from dpvip.privacy import check_randomness, gaussian
from dpvip.privacy.clipping import ClippedGradientSum
from dpvip.privacy.ledger import PrivacyLedger
from dpvip.privacy.noise import gaussian_noise, noise_generator
from dpvip.privacy.optimizers import make_optimizer
from dpvip.privacy.step import DPStep
from dpvip.privacy.randomness import RunRandomness
from dpvip.transfer.head import check_features, evaluate, mean_gradient_step, private_step, softmax_loss

ACCOUNTANT = "gdp (exact, full batch)"
CENTRE = "centre"  # the private mean's noise stream, never a step's
CLIP_MARGIN = 1 - 1e-12  # the private mean clips rows to this share of C_f (float64 rounding)


@dataclass(frozen=True)
class ProbeSettings:
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
    features = features.float()
    return features * (feature_norm / torch.linalg.vector_norm(features, dim=1, keepdim=True).clamp(min=1e-12))


def private_mean(
    features: torch.Tensor, feature_norm: float, sigma: float, generator: torch.Generator | None
) -> torch.Tensor:
    """The rows' mean + N(0, (sigma * feature_norm / n)^2) per coordinate: the Gaussian
    mechanism on the sum of the rows, each first clipped to L2 norm `feature_norm`, divided
    by the public n. Clipped in float64 to a hair under `feature_norm` (rows the caller
    normalised to it lose nothing measurable), so no row's norm exceeds it after rounding and
    the sum's sensitivity is `feature_norm`, not a rounding above it."""
    rows = features.double()
    norms = torch.linalg.vector_norm(rows, dim=1, keepdim=True)
    rows = rows * (feature_norm * CLIP_MARGIN / norms.clamp(min=1e-300)).clamp(max=1.0)
    total = rows.sum(0)
    if sigma > 0:
        total = total + gaussian_noise(total.shape, sigma * feature_norm, generator).double()
    return (total / features.shape[0]).float()


def composed_mu(sigma_mean: float | None, sigma_sgd: float, steps: int) -> float:
    """mu of a private mean (sigma_mean; None: none) and `steps` full-batch gradient steps
    (sigma_sgd), composed exactly as Gaussian DP."""
    return gaussian.composed_mu([(sigma_sgd, steps)] + ([(sigma_mean, 1)] if sigma_mean is not None else []))


def composed_epsilon(sigma_mean: float | None, sigma_sgd: float, steps: int, delta: float) -> float:
    """Epsilon at `delta` of the same composition."""
    return gaussian.epsilon_for_delta(composed_mu(sigma_mean, sigma_sgd, steps), delta)


def calibrate(settings: ProbeSettings) -> dict:
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


def sgd_ledger(settings: ProbeSettings, privacy: dict) -> PrivacyLedger:
    """The ledger of the full-batch gradient steps (sigma_2): it counts them and gives the
    step its noise (pld accounts q = 1 exactly). The run reports the epsilon of these steps
    composed with the private mean (`privacy`), which is its budget here."""
    return PrivacyLedger(
        "pld", 1.0, privacy["sigma_sgd"], settings.clip_norm, settings.delta, privacy["epsilon"], settings.steps
    )


def fit_probe(
    train: torch.Tensor,
    train_labels: torch.Tensor,
    test: torch.Tensor,
    classes: int,
    settings: ProbeSettings,
    randomness: RunRandomness | None = None,
) -> tuple[nn.Linear, torch.Tensor, dict | None]:
    """Train the probe on `train` (n, d); returns it, `test` prepared as `train` was
    (normalised, centred on the same private mean) and the privacy record (None without).
    `randomness`: the run's (a secret run needs it; a seeded one derives it from its settings)."""
    settings.check()
    examples, width = train.shape
    device = train.device
    privacy = None
    if settings.private:
        privacy = calibrate(settings) | {
            "steps": settings.steps,
            "accountant": ACCOUNTANT,
            "clip_norm": settings.clip_norm,
            "feature_norm": settings.feature_norm,
            "examples": examples,
        }
    train, test = train.float(), test.to(device).float()
    if settings.feature_norm is not None:
        train, test = normalise(train, settings.feature_norm), normalise(test, settings.feature_norm)
    if privacy and randomness is None:  # `seeded` settings; `secret` needs the job's key (refused here)
        randomness = RunRandomness.for_settings(settings)
    if privacy:
        privacy |= randomness.record()
    if settings.sigma_ratio is not None:
        sigma = privacy["sigma_mean"] if privacy else 0.0
        centre_noise = noise_generator(randomness, 0, device, CENTRE) if privacy else None
        mean = private_mean(train, settings.feature_norm, sigma, centre_noise)
        train, test = train - mean, test - mean
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
        )
        if privacy
        else None
    )
    labels = train_labels.to(device)
    try:
        for step in range(settings.steps):
            if dp_step:
                private_step(dp_step, step, probe, train, labels, softmax_loss, settings.micro_batch)
            else:
                mean_gradient_step(optimizer, probe, params, train, labels, None, softmax_loss, settings.micro_batch)
    finally:
        if dp_step:
            dp_step.clipper.close()
    return probe, test, privacy


def train_probe(
    train: torch.Tensor,
    train_labels: torch.Tensor,
    test: torch.Tensor,
    test_labels: torch.Tensor,
    classes: int,
    settings: ProbeSettings,
    randomness: RunRandomness | None = None,
) -> dict:
    """Private linear probing on `train` (n, d), scored on `test` (n_test, d): top-1 accuracy
    in percent, the privacy record, the settings (JSON-able)."""
    started = time.perf_counter()
    settings.check()
    if train.ndim != 2:
        raise DpvipInputError(f"probe train features must be (n, d), not {tuple(train.shape)}")
    check_features(train, train_labels, test, test_labels, classes)
    probe, test, privacy = fit_probe(train, train_labels, test, classes, settings, randomness)
    accuracy, _ = evaluate(probe, test, test_labels.to(test.device), softmax_loss, settings.micro_batch)
    return {
        "accuracy": accuracy,
        "steps": settings.steps,
        "privacy": privacy,
        "settings": asdict(settings),
        "seconds": time.perf_counter() - started,
    }
