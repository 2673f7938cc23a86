"""DP optimizers as "privatise the gradient, then any torch optimizer": the privatised
gradient is written into `.grad` and an ordinary optimizer steps. DP-AdamW is ViP's (plain
AdamW on every trainable parameter, as the paper's "default AdamW in PyTorch"); DP-SGD with
momentum is DP-RandP's; DP-Adam and DP-LAMB are Mehta et al.'s (LAMB from timm)."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from dpvip.errors import DpvipInputError
from dpvip.privacy import OPTIMIZERS


def make_optimizer(
    name: str,
    params: Iterable[torch.nn.Parameter],
    lr: float,
    weight_decay: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
    momentum: float = 0.9,
    eps: float = 1e-8,
) -> torch.optim.Optimizer:
    params = list(params)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if name == "lamb":
        from timm.optim import Lamb

        # LAMB as You et al. (and optax, which Mehta et al. used) define it: the layer-wise
        # trust ratio always, and no global gradient-norm clip. timm's defaults apply the
        # ratio only with weight decay and clip the global norm at 1, which would make DP-LAMB
        # without weight decay Adam on a clipped gradient.
        return Lamb(
            params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, always_adapt=True, max_grad_norm=None
        )
    raise DpvipInputError(f"optimizer '{name}' is not one of {', '.join(OPTIMIZERS)}")


def set_gradients(params: Iterable[torch.nn.Parameter], gradients: Iterable[torch.Tensor]) -> None:
    """Write privatised gradients into `.grad`, in the parameters' dtype."""
    for param, gradient in zip(params, gradients, strict=True):
        param.grad = gradient.to(param.dtype)
