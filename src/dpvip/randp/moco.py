"""MoCo (He et al. 2020, "Momentum Contrast for Unsupervised Visual Representation
Learning"), DP-RandP's Table 11 alternative to alignment and uniformity in Phase I.

As the official repository's `moco/builder.py`: a key encoder that is an exponential moving
average of the query encoder (updated before the keys of each batch are computed), a queue
of past keys as negatives, and InfoNCE over (1 positive, queue negatives) / temperature.
The encoders here normalise with GroupNorm, which never mixes examples, so MoCo's shuffled
BatchNorm (against the batch statistics leaking which key is positive) is not needed.

The key encoder and the queue are a module's parameters and buffers, so they travel with
its state_dict: a resumed run continues from the same keys and negatives.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn


def info_nce_loss(
    queries: torch.Tensor, keys: torch.Tensor, negatives: torch.Tensor, temperature: float
) -> torch.Tensor:
    """Mean over i of -log softmax(q_i . [k_i, n_1 .. n_K] / temperature)[0], for unit
    vectors `queries`, `keys` (n, dim) and `negatives` (K, dim)."""
    positive = (queries * keys).sum(dim=1, keepdim=True)
    negative = queries @ negatives.T
    logits = torch.cat([positive, negative], dim=1) / temperature
    # The positive is class 0 of every row.
    return F.cross_entropy(logits, torch.zeros(queries.shape[0], dtype=torch.long, device=queries.device))


class MoCo(nn.Module):
    """`loss(view1, view2)`: queries from `encoder`(view1), keys from the momentum copy
    (view2); the keys then join the queue. `encoder` maps images to unit vectors of `dim`."""

    minimum_batch = 1

    def __init__(self, encoder: nn.Module, dim: int, queue_size: int, momentum: float, temperature: float):
        super().__init__()
        self.encoder = encoder
        self.key_encoder = copy.deepcopy(encoder).requires_grad_(False)
        self.momentum, self.temperature = momentum, temperature
        # Random unit vectors until real keys replace them, as in the official code.
        self.register_buffer("queue", F.normalize(torch.randn(queue_size, dim), dim=1))
        self.register_buffer("queue_pointer", torch.zeros((), dtype=torch.long))

    @torch.no_grad()
    def update_key_encoder(self) -> None:
        """key <- momentum * key + (1 - momentum) * query, parameter by parameter."""
        for key, query in zip(self.key_encoder.parameters(), self.encoder.parameters(), strict=True):
            key.mul_(self.momentum).add_(query.detach(), alpha=1 - self.momentum)

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor) -> None:
        """Write `keys` over the oldest entries, wrapping around the end; the same as
        enqueueing them one by one, also for a batch larger than the queue (its newest
        keys stay) or of another size (a batch with corrupt samples skipped)."""
        size = self.queue.shape[0]
        slots = (self.queue_pointer + torch.arange(keys.shape[0], device=keys.device)) % size
        self.queue[slots[-size:]] = keys[-size:].to(self.queue.dtype)
        self.queue_pointer.copy_((self.queue_pointer + keys.shape[0]) % size)

    def loss(self, view1: torch.Tensor, view2: torch.Tensor) -> torch.Tensor:
        queries = self.encoder(view1)
        with torch.no_grad():
            self.update_key_encoder()
            keys = self.key_encoder(view2)
        # A copy: enqueue below overwrites the queue the backward pass needs.
        loss = info_nce_loss(queries, keys, self.queue.clone(), self.temperature)
        self.enqueue(keys)
        return loss
