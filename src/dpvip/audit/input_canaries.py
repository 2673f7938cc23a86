"""Black-box input canaries: examples planted in a DP run's training set, each a member with
probability 1/2, and scored by the released model's loss on them alone (the attacker sees
only the final weights and the public initialisation, not the updates).

The run is the mechanism's (accountant, q, T, C, delta, sigma) through the one DP step
(`DPStep`: clipper, Poisson sampling, noise, ledger) on a small model of its kind:

- classifiers (DP fine-tuning, DP-RandP Phase III, Mehta's head, DP-RandP's probe): a
  softmax-regression layer on 32 x 32 canvases, trained on scikit-learn's digits (16 x 16 in
  the centre) plus the canaries: out-of-distribution images, one bright dot on the empty
  border, each with a random label. The border is empty in every digit, so only canary j and
  the noise move the weights that read its dot: the score, minus the final loss on its
  label, sees its own inclusions and nothing of the other examples;
- DP-MAE: a pico masked autoencoder (16 x 16, patch 4) on the digits plus canaries of
  uniform noise; the score is how much the reconstruction loss on the canary fell from the
  initial model (fixed masks).

The one-run audit (Steinke et al.) reads these scores as `dpvip.audit.bounds` reads the
white-box ones. Black-box bounds are far below white-box ones at the same epsilon (the
attacker sees T updates as one model): they say what a user of the released model can show.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from dpvip.errors import DpvipInputError
from dpvip.audit.bounds import check_canaries
from dpvip.privacy.clipping import ClippedGradientSum
from dpvip.privacy.randomness import RunRandomness
from dpvip.privacy.step import DPStep

CANVAS, DIGIT = 32, 16  # the digit fills the centre DIGIT x DIGIT of a CANVAS x CANVAS image
DOT = 10.0  # the canary's pixel: its gradient exceeds any clip norm used here, so it is clipped
MAE_IMAGE, MAE_PATCH, MAE_MASKS = 16, 4, 4
MICRO_BATCH = 512
MAE_MECHANISMS = ("dp_mae",)


@dataclass
class InputCanaryRun:
    scores: np.ndarray  # (m,), higher = more likely a member
    included: np.ndarray  # (m,) bool
    epsilon_spent: float


def free_positions() -> np.ndarray:
    """Flat canvas positions outside the digit: no digit ever lights them."""
    border = np.ones((CANVAS, CANVAS), dtype=bool)
    start = (CANVAS - DIGIT) // 2
    border[start : start + DIGIT, start : start + DIGIT] = False
    return np.flatnonzero(border)


def _digits(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The 1,797 digits as (n, 1, size, size) images in [0, 1] and their labels."""
    from dpvip.data.digits import MAX_VALUE, digits_split

    split = digits_split(0.5, 0)
    pixels = torch.as_tensor(split["pixels"], dtype=torch.float32)[:, None] / MAX_VALUE
    images = nn.functional.interpolate(pixels, size=(size, size), mode="nearest")
    return images, torch.as_tensor(split["labels"])


def classifier_data(canaries: int, rng: np.random.Generator):
    """(inputs (n, CANVAS^2), labels, canary inputs, canary labels)."""
    positions = free_positions()
    if canaries > len(positions):
        raise DpvipInputError(f"black-box canaries {canaries} exceed the {len(positions)} free pixels of a canvas")
    images, labels = _digits(DIGIT)
    canvas = torch.zeros(len(images), CANVAS, CANVAS)
    start = (CANVAS - DIGIT) // 2
    canvas[:, start : start + DIGIT, start : start + DIGIT] = images[:, 0]
    dots = torch.zeros(canaries, CANVAS * CANVAS)
    dots[torch.arange(canaries), torch.as_tensor(rng.choice(positions, canaries, replace=False))] = DOT
    return canvas.reshape(len(images), -1), labels, dots, torch.as_tensor(rng.integers(0, 10, canaries))


def black_box_run(
    mechanism, canaries: int, randomness: RunRandomness | None = None, make_step=DPStep
) -> InputCanaryRun:
    """One DP run of `mechanism` (an `AuditMechanism`) with `canaries` input canaries, each a
    member with probability 1/2; returns the canaries' black-box scores."""
    mechanism.check()
    check_canaries(canaries)
    randomness = randomness or RunRandomness.fresh()  # never resumed: no key is stored
    rng = np.random.default_rng(randomness.entropy("input canaries", 0))
    kind = _MaskedAutoencoderKind if mechanism.name in MAE_MECHANISMS else _ClassifierKind
    run = kind(canaries, rng, mechanism.clip_norm)
    included = rng.random(canaries) < 0.5
    members = np.flatnonzero(included)
    examples = run.data_examples + len(members)
    ledger = mechanism.ledger(examples)
    clipper = ClippedGradientSum(run.model, mechanism.clip_norm)
    optimizer = run.optimizer(mechanism.sample_rate * examples)
    dp_step = make_step(clipper, optimizer, ledger, examples, randomness, allow_large_delta=True)
    try:
        for step in range(mechanism.steps):
            chosen = dp_step.batch(step)
            dp_step(step, run.micro_batches(chosen, members))
    finally:
        clipper.close()
    return InputCanaryRun(run.scores(), included, dp_step.ledger.epsilon_spent())


def _parts(chosen: np.ndarray, members: np.ndarray, data_examples: int):
    """Micro-batches of a step's examples as (data indices, canary indices): the training set
    is the data, then the member canaries."""
    for start in range(0, len(chosen), MICRO_BATCH):
        index = torch.as_tensor(chosen[start : start + MICRO_BATCH])
        data = index < data_examples
        yield index[data], torch.as_tensor(members)[index[~data] - data_examples]


class _ClassifierKind:
    """Softmax regression (no bias, zero initialisation: public) on digits and dot canaries."""

    def __init__(self, canaries: int, rng: np.random.Generator, clip_norm: float):
        self.inputs, self.labels, self.canary_inputs, self.canary_labels = classifier_data(canaries, rng)
        self.data_examples = len(self.inputs)
        self.model = nn.Linear(CANVAS * CANVAS, 10, bias=False)
        nn.init.zeros_(self.model.weight)
        self.clip_norm = clip_norm

    def optimizer(self, expected_batch: float) -> torch.optim.Optimizer:
        # one inclusion (a clipped gradient C / (q n)) moves the canary's logits by about 1
        return torch.optim.SGD(self.model.parameters(), lr=expected_batch / (DOT * self.clip_norm))

    def micro_batches(self, chosen: np.ndarray, members: np.ndarray):
        for data, canary in _parts(chosen, members, self.data_examples):
            inputs = torch.cat([self.inputs[data], self.canary_inputs[canary]])
            labels = torch.cat([self.labels[data], self.canary_labels[canary]])
            yield lambda inputs=inputs, labels=labels: nn.functional.cross_entropy(
                self.model(inputs), labels, reduction="none"
            )

    @torch.no_grad()
    def scores(self) -> np.ndarray:
        losses = nn.functional.cross_entropy(self.model(self.canary_inputs), self.canary_labels, reduction="none")
        return (-losses).double().numpy()


class _MaskedAutoencoderKind:
    """A pico MAE (public seeded initialisation) on digits and uniform-noise canaries."""

    def __init__(self, canaries: int, rng: np.random.Generator, clip_norm: float):
        from dpvip.models import MAESettings
        from dpvip.models.mae import MaskedAutoencoder

        images, _ = _digits(MAE_IMAGE)
        self.images = images
        self.data_examples = len(images)
        self.canary_images = torch.as_tensor(rng.random((canaries, 1, MAE_IMAGE, MAE_IMAGE)), dtype=torch.float32)
        torch.manual_seed(0)  # the initialisation is public: the attacker knows it
        settings = MAESettings("pico", image_size=MAE_IMAGE, patch_size=MAE_PATCH, norm_pix_loss=False)
        self.model = MaskedAutoencoder(settings, in_chans=1)
        self.mask_generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
        masks = torch.Generator().manual_seed(1)  # the scoring masks: fixed and public
        self.score_masks = [self.model.mask_noise(canaries, masks) for _ in range(MAE_MASKS)]
        self.initial_losses = self._canary_losses()

    def optimizer(self, expected_batch: float) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def micro_batches(self, chosen: np.ndarray, members: np.ndarray):
        for data, canary in _parts(chosen, members, self.data_examples):
            images = torch.cat([self.images[data], self.canary_images[canary]])
            yield lambda images=images: self.model(images, generator=self.mask_generator).loss

    @torch.no_grad()
    def _canary_losses(self) -> torch.Tensor:
        return torch.stack([self.model(self.canary_images, noise).loss for noise in self.score_masks]).mean(0)

    def scores(self) -> np.ndarray:
        return (self.initial_losses - self._canary_losses()).double().numpy()
