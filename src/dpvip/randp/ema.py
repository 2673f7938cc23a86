"""Exponential moving average of model weights, as DP-RandP reports it (Tang et al.,
Phases II and III: decay 0.9999 with warm-up decay_t = min(decay, (1 + t) / (10 + t)); the
averaged model is the one evaluated).

The average is post-processing of the DP-SGD iterates, so it costs no privacy. The warm-up
keeps the early average from being dominated by the random initialisation: at step 0 the
decay is 0.1, at step 100 it is 101/110, and it reaches 0.9999 only after ~90,000 steps.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


def ema_decay(step: int, decay: float = 0.9999, warmup: bool = True) -> float:
    """The decay used at optimiser step `step` (0 for the first update)."""
    if step < 0:
        raise ValueError(f"EMA step must be non-negative, not {step}")
    return min(decay, (1 + step) / (10 + step)) if warmup else decay


class EMA:
    """`self.averaged`: a copy of `model` (eval mode, no gradients) holding the averages.

    Call `update(step)` after each optimiser step. Floating-point parameters and buffers
    are averaged; other buffers (counters) are copied."""

    def __init__(self, model: nn.Module, decay: float = 0.9999, warmup: bool = True):
        if not 0 <= decay < 1:
            raise ValueError(f"EMA decay must be in [0, 1), not {decay}")
        self.model, self.decay, self.warmup = model, float(decay), bool(warmup)
        self.averaged = copy.deepcopy(model).eval()
        self.averaged.requires_grad_(False)
        self.updates = 0

    def _pairs(self):
        live = dict(self.model.state_dict(keep_vars=True))
        for name, average in self.averaged.state_dict(keep_vars=True).items():
            yield average, live[name].detach()

    @torch.no_grad()
    def update(self, step: int | None = None) -> float:
        """Fold the model's current weights into the average; returns the decay used.
        `step` defaults to the number of updates so far."""
        decay = ema_decay(self.updates if step is None else step, self.decay, self.warmup)
        for average, current in self._pairs():
            if average.is_floating_point():
                average.lerp_(current.to(average.dtype), 1 - decay)  # decay * avg + (1 - decay) * current
            else:
                average.copy_(current)
        self.updates += 1
        return decay

    def state_dict(self) -> dict:
        return {
            "decay": self.decay,
            "warmup": self.warmup,
            "updates": self.updates,
            "averaged": self.averaged.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.decay, self.warmup, self.updates = float(state["decay"]), bool(state["warmup"]), int(state["updates"])
        self.averaged.load_state_dict(state["averaged"])
