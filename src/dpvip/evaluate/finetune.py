"""Few-shot fine-tuning of a whole MAE encoder (ViP A.3, Tables 2, 7, 10): the encoder plus a
linear head on its features, AdamW (weight decay 0.05) over the paper's lr grid, linear
warm-up then cosine, AutoAugment (ImageNet policy) on the training images.

The head reads the features of a `FeatureChoice` (default: mean of the patch tokens after
the final norm, as MAE's fine-tuning pools). The decoder is not used and not trained.
`train_classifier` is the loop itself, for any classifier and optimizer (the CNN baselines
use it with SGD, as A.3 does for AlexNet and ResNet). A run can keep its state (`saved`) and
resume mid-epoch to the same weights; the grid keeps each finished lr's accuracy.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import torch
from torch import nn
from torchvision import transforms

from dpvip.data.images import IMAGENET_MEAN, IMAGENET_STD
from dpvip.per_example import PER_EXAMPLE
from dpvip.errors import DpvipInputError
from dpvip.evaluate.accuracy import classifier_accuracy, classifier_score
from dpvip.evaluate.datasets import LabelledImages
from dpvip.evaluate.features import FeatureChoice, trainable_features
from dpvip.evaluate.linear_probe import best_of_grid
from dpvip.evaluate.resumable import ShuffledEpochs, restore_training, training_state
from dpvip.models.mae import MaskedAutoencoder
from dpvip.selection import TEST, Selection
from dpvip.train.optim import warmup_cosine
from dpvip.train.resume import JobState, LoopState


@dataclass(frozen=True)
class FinetuneSettings:
    epochs: int = 200
    warmup_epochs: int = 10
    batch_size: int = 32
    lr: float = 3e-4
    weight_decay: float = 0.05
    auto_augment: bool = True
    features: FeatureChoice = FeatureChoice(pooling="mean")
    seed: int = 0

    def check(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or not self.lr > 0:
            raise DpvipInputError(
                "fine-tuning needs epochs >= 1, batch_size >= 1 and lr > 0 "
                f"(got {self.epochs}, {self.batch_size}, {self.lr})"
            )
        self.features.check()


class Classifier(nn.Module):
    """An MAE's encoder with a linear head (zero-initialised bias, weights N(0, 0.01^2))."""

    def __init__(self, mae: MaskedAutoencoder, classes: int, choice: FeatureChoice):
        super().__init__()
        self.mae, self.choice = mae, choice
        width = mae.norm.normalized_shape[0]
        # where the encoder is (a GPU), or a GPU job's head stays on the CPU its forward never meets
        self.head = nn.Linear(choice.width(width), classes, device=mae.norm.weight.device)
        nn.init.normal_(self.head.weight, std=0.01)
        nn.init.zeros_(self.head.bias)
        for name, param in mae.named_parameters():  # the decoder has no part in classification
            param.requires_grad_(not name.startswith(("decoder", "mask_token")))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(trainable_features(self.mae, images, self.choice))


class AutoAugmented:
    """AutoAugment (ImageNet policy) on normalised image tensors: back to uint8, augment,
    normalise again."""

    def __init__(self):
        self.policy = transforms.AutoAugment(transforms.AutoAugmentPolicy.IMAGENET)
        self.mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
        self.std = torch.tensor(IMAGENET_STD).view(3, 1, 1)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        pixels = ((images * self.std + self.mean).clamp(0, 1) * 255).round().to(torch.uint8)
        augmented = torch.stack([self.policy(image) for image in pixels])
        return (augmented.float() / 255 - self.mean) / self.std


def finetune(
    mae: MaskedAutoencoder, train: LabelledImages, settings: FinetuneSettings, saved: LoopState | None = None
) -> Classifier:
    """A copy of `mae` fine-tuned with a head on `train` (the given model is left as it was);
    `saved`: where the loop keeps its state (a rerun resumes it)."""
    torch.manual_seed(settings.seed)
    classifier = Classifier(copy.deepcopy(mae), train.classes, settings.features)
    return train_classifier(classifier, train, settings, adamw, saved)


def adamw(params: list[nn.Parameter], settings: FinetuneSettings) -> torch.optim.Optimizer:
    """ViP's optimizer for ViTs: AdamW, PyTorch's defaults but lr and weight decay."""
    return torch.optim.AdamW(params, lr=settings.lr, weight_decay=settings.weight_decay)


OptimizerOf = Callable[[list[nn.Parameter], FinetuneSettings], torch.optim.Optimizer]


def train_classifier(
    model: nn.Module,
    train: LabelledImages,
    settings: FinetuneSettings,
    optimizer_of: OptimizerOf = adamw,
    saved: LoopState | None = None,
) -> nn.Module:
    """`model`'s trainable parameters trained on `train` in place: cross-entropy on shuffled
    batches, warm-up then cosine by step, AutoAugment if set; returns it in eval mode.
    `saved`: where the loop keeps its state, saved every k steps and on SIGTERM (a rerun
    resumes it: the model is built as before, then the state replaces its weights)."""
    settings.check()
    if len(train) == 0:
        raise DpvipInputError("fine-tuning needs at least one training image")
    generator = torch.Generator().manual_seed(settings.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = optimizer_of(params, settings)
    steps = ShuffledEpochs(
        len(train), min(settings.batch_size, len(train)), settings.epochs, generator, drop_last=False
    )
    warmup = min(settings.warmup_epochs * steps.per_epoch, steps.total)
    scheduler = warmup_cosine(optimizer, steps.total, warmup, 0.0)
    augment = AutoAugmented() if settings.auto_augment else None
    loss_function = nn.CrossEntropyLoss()
    device = params[0].device
    model.train()
    saved = LoopState.of(saved)
    with saved:
        restore_training(saved, model, optimizer, steps)
        for step, chosen in steps:
            images = train.images[chosen]
            if augment is not None:
                images = augment(images)
            scheduler.step_update(step)
            optimizer.zero_grad(set_to_none=True)
            loss_function(model(images.to(device)), train.labels[chosen].to(device)).backward()
            optimizer.step()
            done = step + 1
            saved.after_step(done, lambda: training_state(model, optimizer, steps, done), last=done == steps.total)
    return model.eval()


def finetune_grid(
    mae: MaskedAutoencoder,
    train: LabelledImages,
    test: LabelledImages,
    settings: FinetuneSettings,
    lrs: list[float],
    job: JobState | None = None,
    validation: LabelledImages | None = None,
    selection: Selection = TEST,
) -> dict:
    """Top-1 test accuracy for each learning rate of the grid, and the chosen one's (with its
    per-example correctness): on `validation`'s accuracy when `selection` validates (then
    `validation` is needed), else on test accuracy. `job`: where the runs' states and the
    finished grid points are kept."""
    if selection.validating and validation is None:
        raise DpvipInputError("choosing the learning rate on validation accuracy needs a validation split")

    def accuracy_of(lr: float, saved) -> dict:
        classifier = finetune(mae, train, replace(settings, lr=lr), saved)
        accuracy, record = classifier_score(classifier, test)
        found = {"test": accuracy, PER_EXAMPLE: record}
        if selection.validating:
            found["validation"] = classifier_accuracy(classifier, validation)
        return found

    return best_of_grid(accuracy_of, lrs, "lr", job, asdict(settings), selection)
