"""A DP-RandP Phase I checkpoint's format, and loading its backbone for the private phases
(torch only: private runs and feature extraction need none of Phase I's training stack)."""

from __future__ import annotations

import numbers
from pathlib import Path

import torch
from torch import nn

from dpvip.errors import DpvipInputError, first_line
from dpvip.models.wrn import WideResNet
from dpvip.train import checkpoint

FORMAT = "dpvip.randp_phase1/1"


def load_backbone(path: str | Path, num_classes: int, device: str | torch.device = "cpu") -> tuple[WideResNet, dict]:
    """(network, record): the Phase I backbone with a new classifier of `num_classes`
    outputs whose weight and bias are zero, as DP-RandP's Phase II starts it."""
    if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or num_classes < 1:
        raise DpvipInputError(f"num_classes {num_classes!r} must be a positive integer")
    num_classes = int(num_classes)  # also from numpy
    payload = checkpoint.load(path)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise DpvipInputError(f"{path} is not a DP-RandP Phase I checkpoint (format {FORMAT})")
    model = WideResNet(payload["size"], num_classes=num_classes)
    # The stored classifier (of Phase I's default width) is replaced, not loaded.
    weights = {k: v for k, v in payload["model"].items() if not k.startswith("classifier.")}
    try:
        missing, unexpected = model.load_state_dict(weights, strict=False)
    except RuntimeError as err:  # a tensor of another shape
        raise DpvipInputError(f"{path}: its weights do not fit a {payload['size']}: {first_line(err)}") from None
    if unexpected or set(missing) != {"classifier.weight", "classifier.bias"}:
        raise DpvipInputError(
            f"{path}: its weights do not fit a {payload['size']} "
            f"(missing {sorted(missing)[:3]}, unexpected {sorted(unexpected)[:3]})"
        )
    nn.init.zeros_(model.classifier.weight)
    nn.init.zeros_(model.classifier.bias)
    return model.to(device), payload["record"]
