"""CNN baselines of few-shot fine-tuning (ViP Table 2, appendix A.3): AlexNet and SimCLR's
ResNet-50, fine-tuned whole with a new linear classifier.

A.3: "For convolutional neural networks (AlexNet, ResNet used in SimCLR), we apply the SGD
optimizer ... lr in {1e-2, 1e-3, 1e-4}, momentum 0.9, weight decay 0.0 ... cosine learning
rate decay, 10 warm-up epochs, 200 total epochs, AutoAugment." The loop and its settings
are the ViT fine-tuning's (`finetune.train_classifier`, `FinetuneSettings`: epochs, warm-up,
batch, lr, weight decay, AutoAugment, seed; its `features` concern MAE encoders only); the
model differs, and the optimizer: SGD with the paper's fixed momentum 0.9.

Weights come from a checkpoint the user provides: a torchvision-style state dict, bare or
under "state_dict" / "model". Wrapper prefixes ("module." from DataParallel, "encoder.",
"backbone.", "model." from SimCLR re-implementations) are stripped; the old classifier
(and a SimCLR projection head stored in its place) is dropped; every other key must fit.
Without a checkpoint the network is randomly initialised from the seed (the embedded
default), and the result records "random".

Images are not resized here: a network refuses inputs smaller than it can take (AlexNet's
five pooling stages need 63 px), so the caller builds the dataset at a fitting size
(`datasets.digits(64)`) and no evaluation rescales images behind the user's back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from torch import nn
from torchvision import models

from dpvip.errors import DpvipInputError, first_line
from dpvip.evaluate.datasets import LabelledImages
from dpvip.evaluate.accuracy import classifier_accuracy
from dpvip.evaluate.finetune import FinetuneSettings, train_classifier
from dpvip.evaluate.linear_probe import best_of_grid
from dpvip.files import sha256
from dpvip.train.resume import JobState, LoopState


@dataclass(frozen=True)
class CNNBaseline:
    build: Callable[..., nn.Module]  # torchvision constructor taking num_classes
    head: str  # the final linear layer, replaced for the downstream classes
    min_image_size: int  # smallest input side the network accepts


CNN_BASELINES = {
    "alexnet": CNNBaseline(models.alexnet, "classifier.6", 63),
    "resnet50": CNNBaseline(models.resnet50, "fc", 32),  # SimCLR's backbone (1x width)
}
CNN_LRS = (1e-2, 1e-3, 1e-4)
CNN_FINETUNE = FinetuneSettings(lr=1e-2, weight_decay=0.0)
CNN_MOMENTUM = 0.9
WRAPPER_PREFIXES = ("module.", "encoder.", "backbone.", "model.")
# Older checkpoints lack BatchNorm's step counter; torch fills it in, so it may be missing.
OPTIONAL_KEYS = ("num_batches_tracked",)


def baseline(arch: str) -> CNNBaseline:
    if arch not in CNN_BASELINES:
        raise DpvipInputError(f"CNN baseline '{arch}' is not one of {', '.join(CNN_BASELINES)}")
    return CNN_BASELINES[arch]


def _strip_wrappers(key: str) -> str:
    stripped = True
    while stripped:
        stripped = False
        for prefix in WRAPPER_PREFIXES:
            if key.startswith(prefix):
                key, stripped = key[len(prefix) :], True
    return key


def checkpoint_file(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise DpvipInputError(f"checkpoint {path} does not exist")
    return path


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a checkpoint file, by their stored names."""
    path = checkpoint_file(path)
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # pickle, zip and torch errors alike: the file is not a checkpoint
        raise DpvipInputError(f"checkpoint {path} cannot be read: {first_line(err)}") from None
    for wrapper in ("state_dict", "model"):
        if isinstance(loaded, dict) and isinstance(loaded.get(wrapper), dict):
            loaded = loaded[wrapper]
            break
    if not isinstance(loaded, dict) or not all(isinstance(value, torch.Tensor) for value in loaded.values()):
        raise DpvipInputError(f"checkpoint {path} holds no state dict (a mapping of names to tensors)")
    return loaded


def load_backbone(model: nn.Module, arch: str, state: dict[str, torch.Tensor], source: str) -> None:
    """Load every tensor of `state` but the classifier's into `model`, wrapper prefixes
    stripped; refuses a state that misses a tensor, has an extra one or one of another
    shape, naming the first."""
    head = baseline(arch).head + "."
    stripped = {_strip_wrappers(key): value for key, value in state.items()}
    if len(stripped) != len(state):
        raise DpvipInputError(f"{source} names a tensor both with and without a wrapper prefix")
    state = {key: value for key, value in stripped.items() if not key.startswith(head)}
    wanted = {key: value for key, value in model.state_dict().items() if not key.startswith(head)}
    missing = [key for key in wanted if key not in state and not key.endswith(OPTIONAL_KEYS)]
    unexpected = [key for key in state if key not in wanted]
    if missing or unexpected:
        found = [f"missing {missing[0]} ({len(missing)} in all)"] if missing else []
        found += [f"unexpected {unexpected[0]} ({len(unexpected)} in all)"] if unexpected else []
        raise DpvipInputError(f"{source} does not fit {arch}: {'; '.join(found)}")
    for key, value in state.items():
        if value.shape != wanted[key].shape:
            raise DpvipInputError(
                f"{source} does not fit {arch}: {key} has shape {tuple(value.shape)}, not {tuple(wanted[key].shape)}"
            )
    model.load_state_dict(state, strict=False)  # the new classifier keeps its initialisation


def build_cnn(arch: str, classes: int, checkpoint: str | Path | None = None) -> nn.Module:
    """`arch` with a `classes`-way classifier: its other weights from `checkpoint`, or a
    random initialisation from torch's global generator."""
    model = baseline(arch).build(num_classes=classes)
    if checkpoint is not None:
        load_backbone(model, arch, read_state_dict(checkpoint), f"checkpoint {checkpoint}")
    return model


def check_image_size(arch: str, images: LabelledImages) -> None:
    smallest = images.image_size  # LabelledImages or FolderImages (read on demand)
    if smallest < baseline(arch).min_image_size:
        raise DpvipInputError(
            f"{arch} needs images of at least {baseline(arch).min_image_size} px, {images.name} has {smallest} px: "
            "build the dataset at a larger image size"
        )


def sgd(params: list[nn.Parameter], settings: FinetuneSettings) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=settings.lr, momentum=CNN_MOMENTUM, weight_decay=settings.weight_decay)


def cnn_finetune(
    arch: str,
    checkpoint: str | Path | None,
    train: LabelledImages,
    settings: FinetuneSettings = CNN_FINETUNE,
    saved: LoopState | None = None,
) -> nn.Module:
    """`arch` (from `checkpoint`, or random from the seed) fine-tuned whole on `train` with
    SGD (momentum 0.9); `saved`: where the loop keeps its state (a rerun resumes it)."""
    settings.check()
    check_image_size(arch, train)
    torch.manual_seed(settings.seed)
    return train_classifier(build_cnn(arch, train.classes, checkpoint), train, settings, sgd, saved)


def init_record(checkpoint: str | Path | None) -> dict:
    if checkpoint is None:
        return {"init": "random"}
    return {"init": str(checkpoint), "init_sha256": sha256(checkpoint_file(checkpoint))}


def cnn_finetune_grid(
    arch: str,
    checkpoint: str | Path | None,
    train: LabelledImages,
    test: LabelledImages,
    settings: FinetuneSettings = CNN_FINETUNE,
    lrs=CNN_LRS,
    job: JobState | None = None,
) -> dict:
    """Top-1 test accuracy (a fraction, as `finetune_grid`) for each lr, the best, where the
    weights came from and the optimizer. `job`: where the runs' states and the finished grid
    points are kept."""
    check_image_size(arch, test)
    record = init_record(checkpoint) | {
        "arch": arch,
        "optimizer": "sgd",
        "momentum": CNN_MOMENTUM,
    }  # before training: a missing file fails fast

    def accuracy_of(lr: float, saved) -> float:
        return classifier_accuracy(cnn_finetune(arch, checkpoint, train, replace(settings, lr=lr), saved), test)

    weights = {"arch": arch, "init_sha256": record.get("init_sha256", "random")}
    return best_of_grid(accuracy_of, list(lrs), "lr", job, asdict(settings) | weights) | record
