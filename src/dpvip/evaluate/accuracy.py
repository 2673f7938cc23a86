"""Top-1 accuracy of a classifier on a labelled set (torch only: DP-RandP's private runs use it
without the fine-tuning stack)."""

from __future__ import annotations

import torch
from torch import nn


@torch.no_grad()
def classifier_accuracy(classifier: nn.Module, test, batch_size: int = 256) -> float:
    """Top-1 accuracy (a fraction) on `test` (LabelledImages or FolderImages), in batches on
    the classifier's device."""
    classifier.eval()
    device = next(classifier.parameters()).device
    correct = sum(
        int((classifier(images.to(device)).argmax(1) == labels.to(device)).sum())
        for images, labels in test.batches(batch_size)
    )
    return correct / max(1, len(test))
