"""AdamW without weight decay on norms and biases, and warm-up then cosine decay by step."""

from __future__ import annotations

import torch
from timm.optim import param_groups_weight_decay
from timm.scheduler import CosineLRScheduler


def adamw(model: torch.nn.Module, lr: float, weight_decay: float, betas: tuple[float, float]) -> torch.optim.AdamW:
    """AdamW with decay on weights only (1-D parameters, i.e. norms and biases, excluded)."""
    groups = param_groups_weight_decay(model, weight_decay)
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas))


def warmup_cosine(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_steps: int, min_lr: float
) -> CosineLRScheduler:
    """Linear warm-up from 0 over `warmup_steps`, then cosine to `min_lr` at `total_steps`.
    Stateless in the step: call `step_update(step)` before each update."""
    return CosineLRScheduler(
        optimizer,
        t_initial=max(1, total_steps - warmup_steps),
        lr_min=min_lr,
        warmup_t=warmup_steps,
        warmup_lr_init=0.0,
        warmup_prefix=True,
        t_in_epochs=False,
    )
