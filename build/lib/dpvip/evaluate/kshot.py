"""Class-balanced K-shot subsets for few-shot fine-tuning (ViP Tables 2, 7, 10): exactly K
examples of every class, drawn without replacement from a seed."""

from __future__ import annotations

import numpy as np

from dpvip.errors import DpvipInputError


def k_shot_indices(labels: np.ndarray, shots: int, seed: int) -> np.ndarray:
    """Sorted indices of `shots` examples per class of `labels`, the same for the same seed."""
    labels = np.asarray(labels)
    if shots < 1:
        raise DpvipInputError(f"shots {shots} must be a positive integer")
    rng = np.random.default_rng(seed)
    chosen = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        if len(members) < shots:
            raise DpvipInputError(f"class {label} has {len(members)} examples, fewer than {shots} shots")
        chosen.append(rng.choice(members, size=shots, replace=False))
    return np.sort(np.concatenate(chosen)) if chosen else np.empty(0, dtype=np.int64)
