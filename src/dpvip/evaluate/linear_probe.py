"""Linear probing of frozen features (ViP A.3, after He et al.): BatchNorm1d without affine
parameters, then a linear layer (weights ~ N(0, 0.01^2), zero bias), trained with LARS
(momentum 0.9, trust coefficient 0.001, weight decay 0) at lr = blr * batch / 256, linear
warm-up then cosine. LARS adapts the weight matrix only, not the bias, as MAE's LARS does.

Without augmentation (the embedded default) features are computed once and the probe trains
on them (`train_probe`). With augmentation (MAE's probe: RandomResizedCrop + horizontal flip,
the paper scale), every batch goes through the frozen encoder again (`train_probe_augmented`);
the crop is taken from the evaluation-size centre crop, not from the full photograph.

Each probe's loop can keep its state (`saved`, from a `dpvip.train.resume.JobState`):
saved every k steps and on SIGTERM, resumed mid-epoch by a rerun to the same weights; the
grid (`probe_grid`, `best_of_grid`) keeps each finished point's accuracy.

The base learning rate is chosen on a validation split held out of the training data by
default (`dpvip.selection`): the paper's practice, the best test accuracy of the grid, is
`selection: {mode: test}`, and the result says which (`"selection"`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import torch
from timm.optim import Lars
from torch import nn
from torchvision.transforms import v2

from dpvip.errors import DpvipInputError
from dpvip.per_example import PER_EXAMPLE, correctness_record
from dpvip.evaluate.features import FeatureChoice, encoder_features
from dpvip.evaluate.resumable import ShuffledEpochs, restore_training, training_state
from dpvip.models.mae import MaskedAutoencoder
from dpvip.selection import TEST, Selection, best
from dpvip.train.optim import warmup_cosine
from dpvip.train.resume import JobState, LoopState


@dataclass(frozen=True)
class ProbeSettings:
    epochs: int = 90
    warmup_epochs: int = 10
    batch_size: int = 16384
    blr: float = 0.1
    weight_decay: float = 0.0
    momentum: float = 0.9
    augment: bool = False  # RandomResizedCrop + flip through the frozen encoder each batch
    seed: int = 0

    def check(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or not self.blr > 0:
            raise DpvipInputError(
                "linear probe needs epochs >= 1, batch_size >= 1 and blr > 0 "
                f"(got {self.epochs}, {self.batch_size}, {self.blr})"
            )


class LinearProbe(nn.Module):
    def __init__(self, features: int, classes: int):
        super().__init__()
        self.norm = nn.BatchNorm1d(features, affine=False, eps=1e-6)
        self.head = nn.Linear(features, classes)
        nn.init.normal_(self.head.weight, std=0.01)
        nn.init.zeros_(self.head.bias)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(features))


def lars(probe: LinearProbe, lr: float, settings: ProbeSettings) -> Lars:
    """LARS with the trust ratio on the weight matrix only (MAE excludes 1-d parameters)."""
    groups = [
        {"params": [probe.head.weight], "weight_decay": settings.weight_decay, "always_adapt": True},
        {"params": [probe.head.bias], "weight_decay": 0.0, "always_adapt": False},
    ]
    return Lars(groups, lr=lr, momentum=settings.momentum, trust_coeff=0.001)


def _fit(
    width: int,
    classes: int,
    examples: int,
    settings: ProbeSettings,
    batch_of: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
    saved: LoopState | None = None,
) -> LinearProbe:
    """Train a probe on `batch_of(indices)` (the features and labels of those examples) over
    shuffled full batches; `saved`: where the loop keeps its state (a rerun resumes it)."""
    settings.check()
    if examples == 0:
        raise DpvipInputError("linear probe needs as many labels as features, and at least one")
    generator = torch.Generator().manual_seed(settings.seed)
    torch.manual_seed(settings.seed)
    probe = LinearProbe(width, classes)
    batch = min(settings.batch_size, examples)
    optimizer = lars(probe, settings.blr * batch / 256, settings)
    steps = ShuffledEpochs(examples, batch, settings.epochs, generator, drop_last=True)
    warmup = min(settings.warmup_epochs * steps.per_epoch, steps.total)
    scheduler = warmup_cosine(optimizer, steps.total, warmup, 0.0)
    loss_function = nn.CrossEntropyLoss()
    probe.train()
    saved = LoopState.of(saved)
    with saved:
        restore_training(saved, probe, optimizer, steps)
        for step, chosen in steps:
            features, labels = batch_of(chosen)
            scheduler.step_update(step)
            optimizer.zero_grad(set_to_none=True)
            loss_function(probe(features), labels).backward()
            optimizer.step()
            done = step + 1
            saved.after_step(done, lambda: training_state(probe, optimizer, steps, done), last=done == steps.total)
    return probe.eval()


def train_probe(
    features: torch.Tensor,
    labels: torch.Tensor,
    classes: int,
    settings: ProbeSettings,
    saved: LoopState | None = None,
) -> LinearProbe:
    """A probe trained on precomputed (features, labels) for `settings.epochs` epochs."""
    if len(features) != len(labels) or len(features) == 0:
        raise DpvipInputError(f"linear probe needs as many labels as features (got {len(features)} and {len(labels)})")
    return _fit(
        features.shape[1], classes, len(features), settings, lambda chosen: (features[chosen], labels[chosen]), saved
    )


def probe_augmentation(image_size: int) -> v2.Compose:
    """MAE's probe augmentation on evaluation-size image tensors (scale 0.08-1, bicubic)."""
    return v2.Compose(
        [
            v2.RandomResizedCrop(image_size, interpolation=v2.InterpolationMode.BICUBIC, antialias=True),
            v2.RandomHorizontalFlip(),
        ]
    )


def train_probe_augmented(
    mae: MaskedAutoencoder,
    choice: FeatureChoice,
    train,
    settings: ProbeSettings,
    saved: LoopState | None = None,
) -> LinearProbe:
    """A probe trained on features of freshly augmented views of `train` (LabelledImages or
    FolderImages) each epoch, from the frozen encoder in eval mode."""
    mae.eval()
    device = next(mae.parameters()).device
    augment = probe_augmentation(mae.settings.image_size)

    def batch_of(chosen: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        images = train.subset(chosen)
        views = torch.stack([augment(image) for image in images.images])
        return encoder_features(mae, views.to(device), choice).float().cpu(), images.labels

    width = choice.width(mae.norm.normalized_shape[0])
    return _fit(width, train.classes, len(train), settings, batch_of, saved)


@torch.no_grad()
def top1_correct(probe: LinearProbe, features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Whether the probe's top-1 prediction is right, for each example in order."""
    probe.eval()
    return probe(features).argmax(dim=1) == labels


def top1_accuracy(probe: LinearProbe, features: torch.Tensor, labels: torch.Tensor) -> float:
    return float(top1_correct(probe, features, labels).float().mean())


def scores(
    probe: LinearProbe,
    test: tuple[torch.Tensor, torch.Tensor],
    validation: tuple[torch.Tensor, torch.Tensor] | None,
    test_set: str | None = None,
) -> float | dict:
    """A grid point's result: its test accuracy, or {"validation", "test"} accuracies when a
    validation split is held out; with `test_set` (the test data's name), {"test", and
    PER_EXAMPLE: each test example's correctness (`dpvip.per_example`)} as well."""
    if validation is None and test_set is None:
        return top1_accuracy(probe, *test)
    correct = top1_correct(probe, *test)
    found = {"test": float(correct.float().mean())}
    if validation is not None:
        found["validation"] = top1_accuracy(probe, *validation)
    if test_set is not None:
        found[PER_EXAMPLE] = correctness_record(correct.cpu().numpy(), test_set, test[1].cpu().numpy())
    return found


def probe_grid(
    train: tuple[torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor],
    classes: int,
    settings: ProbeSettings,
    blrs: list[float],
    job: JobState | None = None,
    selection: Selection | None = None,
    test_set: str | None = None,
) -> dict:
    """Top-1 test accuracy for each base learning rate of the grid, and the chosen one's
    (with `test_set`, the test data's name, also its per-example correctness).
    `selection` (default: validation, 10%): a share of `train` (stratified) is held out, every
    probe trains on the rest and the base learning rate best on the held-out share is chosen;
    `dpvip.selection.TEST` trains on all of `train` and chooses on test accuracy (the paper
    reports the best of its grid on the evaluation set: optimistic). `job`: where the
    probes' states and the finished grid points are kept."""
    selection = Selection.of(selection)
    features, labels = train
    validation, split = None, {}
    if selection.validating:
        kept, held = (torch.from_numpy(part) for part in selection.split(labels.numpy()))
        features, labels, validation = features[kept], labels[kept], (features[held], labels[held])
        split = {"split": {"train": len(kept), "validation": len(held), "test": len(test[1])}}

    def accuracy_of(blr: float, saved) -> float | dict:
        probe = train_probe(features, labels, classes, replace(settings, blr=blr), saved)
        return scores(probe, test, validation, test_set)

    return best_of_grid(accuracy_of, blrs, "blr", job, asdict(settings), selection) | split


def best_of_grid(
    accuracy_of: Callable,
    values: list[float],
    name: str,
    job: JobState | None = None,
    settings: dict | None = None,
    selection: Selection = TEST,
) -> dict:
    """The chosen point of a hyperparameter grid: {"accuracy": its test accuracy, name: its
    value, "grid": {value: test accuracy}, "selection": how it was chosen, and PER_EXAMPLE:
    its per-example correctness where the points record it}; with a validating
    `selection` also "validation": {value: validation accuracy} and the chosen point's
    "validation_accuracy". `accuracy_of(value, saved)` trains with `saved` as its loop state
    and returns the point's test accuracy (TEST: chosen on it, the papers' practice), or
    {"validation", "test"} accuracies (chosen on validation). With a `job`, each finished
    point's result is kept and a rerun trains only the points not done."""
    job = job or JobState()
    fingerprint = {"grid": name, "settings": settings or {}}
    if selection.validating:  # test mode keeps the fingerprint it always had
        fingerprint["selection"] = selection.record()
    done = job.grid(name, fingerprint)
    results = {}
    for value in values:
        stored = done.result(value) if done is not None else None
        if stored is not None:
            results[value] = stored
            continue
        saved = job.loop(f"{name}{value}", fingerprint | {name: value})
        results[value] = accuracy_of(value, saved)
        if done is not None:
            done.add(value, results[value])
        saved.clear()
    if done is not None:
        done.clear()  # the caller writes the result next
    records = {value: result.pop(PER_EXAMPLE, None) for value, result in results.items() if isinstance(result, dict)}
    records = {value: record for value, record in records.items() if record is not None}
    if not selection.validating:
        results = {value: result["test"] if isinstance(result, dict) else result for value, result in results.items()}
        chosen = best(results)
        found = {"accuracy": results[chosen], name: chosen, "grid": results, "selection": selection.record()}
        return found | ({PER_EXAMPLE: records[chosen]} if chosen in records else {})
    if not all(isinstance(result, dict) for result in results.values()):
        raise DpvipInputError(f"choosing {name} on validation accuracy needs each grid point's validation accuracy")
    accuracies = {value: result["test"] for value, result in results.items()}
    validation = {value: result["validation"] for value, result in results.items()}
    chosen = best(validation)
    return {
        "accuracy": accuracies[chosen],
        name: chosen,
        "grid": accuracies,
        "validation": validation,
        "validation_accuracy": validation[chosen],
        "selection": selection.record(),
    } | ({PER_EXAMPLE: records[chosen]} if chosen in records else {})
