"""Top-1 accuracy of a classifier on a labelled set (torch only: DP-RandP's private runs use it
without the fine-tuning stack)."""

from __future__ import annotations

import torch
from torch import nn


@torch.no_grad()
def classifier_accuracy(classifier: nn.Module, test, batch_size: int = 256, dist=None) -> float:
    """Top-1 accuracy (a fraction) on `test` (LabelledImages or FolderImages), in batches on
    the classifier's device. With `dist` (a `Distributed` of several processes) each rank
    scores every world-th batch and the counts are summed: the same batches as one process."""
    classifier.eval()
    device = next(classifier.parameters()).device
    if dist is None or dist.world == 1:
        correct = sum(
            int((classifier(images.to(device)).argmax(1) == labels.to(device)).sum())
            for images, labels in test.batches(batch_size)
        )
    else:
        correct = 0
        for start in range(dist.rank * batch_size, len(test), dist.world * batch_size):
            part = test.subset(range(start, min(start + batch_size, len(test))))
            correct += int((classifier(part.images.to(device)).argmax(1) == part.labels.to(device)).sum())
        correct = round(dist.sum(correct))
    return correct / max(1, len(test))
