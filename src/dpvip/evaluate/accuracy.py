"""Top-1 accuracy of a classifier on a labelled set, and each example's correctness (torch
only: DP-RandP's private runs use it without the fine-tuning stack)."""

from __future__ import annotations

import torch
from torch import nn

from dpvip.per_example import correctness_record


@torch.no_grad()
def classifier_correct(classifier: nn.Module, test, batch_size: int = 256, dist=None) -> torch.Tensor:
    """Whether the classifier's top-1 prediction is right, for each example of `test`
    (LabelledImages or FolderImages) in its order (bool, on the CPU), in batches on the
    classifier's device. With `dist` (a `Distributed` of several processes) each rank scores
    every world-th batch and the ranks' parts are summed: the same as one process."""
    classifier.eval()
    device = next(classifier.parameters()).device
    if dist is None or dist.world == 1:
        parts = [
            (classifier(images.to(device)).argmax(1) == labels.to(device)).cpu()
            for images, labels in test.batches(batch_size)
        ]
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.bool)
    correct = torch.zeros(len(test), dtype=torch.float64, device=device)
    for start in range(dist.rank * batch_size, len(test), dist.world * batch_size):
        part = test.subset(range(start, min(start + batch_size, len(test))))
        right = classifier(part.images.to(device)).argmax(1) == part.labels.to(device)
        correct[start : start + len(right)] = right.double()
    dist.sum_tensor(correct)
    return correct.cpu() > 0.5


def classifier_accuracy(classifier: nn.Module, test, batch_size: int = 256, dist=None) -> float:
    """Top-1 accuracy (a fraction) on `test`: see `classifier_correct`."""
    return _fraction(classifier_correct(classifier, test, batch_size, dist))


def classifier_score(classifier: nn.Module, test, batch_size: int = 256, dist=None) -> tuple[float, dict]:
    """(top-1 accuracy as a fraction, the per-example record of `dpvip.per_example`) on `test`,
    which names the test set (its `name` and `labels`)."""
    correct = classifier_correct(classifier, test, batch_size, dist)
    return _fraction(correct), correctness_record(correct.numpy(), test.name, test.labels.numpy())


def _fraction(correct: torch.Tensor) -> float:
    return float(correct.double().mean()) if len(correct) else 0.0
