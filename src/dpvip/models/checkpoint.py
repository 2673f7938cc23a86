"""MAE checkpoints that later stages load: the network's settings travel with its weights,
so a checkpoint can never be loaded into a network of another size."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch

from dpvip.errors import DpvipInputError
from dpvip.models.mae import MaskedAutoencoder, MAESettings
from dpvip.train.checkpoint import load, save_atomic

FORMAT = "dpvip.mae/1"
# Settings that change the network's shape; mask ratio and loss may differ between stages.
ARCHITECTURE_KEYS = ("size", "image_size", "patch_size", "decoder_depth")


def save_mae(model: MaskedAutoencoder, path: str | Path, record: dict) -> None:
    """Weights, settings and `record` (what trained it, on what, for how long)."""
    save_atomic({"format": FORMAT, "settings": asdict(model.settings), "model": model.state_dict(), "record": record}, path)


def read_mae(path: str | Path) -> dict:
    payload = load(path)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise DpvipInputError(f"{path} is not an MAE checkpoint of dpvip (format {FORMAT})")
    return payload


def load_mae(path: str | Path, expected: MAESettings | None = None, device: str | torch.device = "cpu") -> tuple[MaskedAutoencoder, dict]:
    """(model, record) from `path`; with `expected`, refuse a checkpoint of another shape.

    The model takes the checkpoint's architecture and `expected`'s mask ratio and loss
    settings (a DP stage may mask differently from the synthetic stage it starts from).
    """
    payload = read_mae(path)
    stored = payload["settings"]
    settings = MAESettings(**stored)
    if expected is not None:
        for key in ARCHITECTURE_KEYS:
            if stored[key] != getattr(expected, key):
                raise DpvipInputError(f"checkpoint {path} holds an MAE with {key} {stored[key]!r}, not {getattr(expected, key)!r}")
        settings = expected
    model = MaskedAutoencoder(settings)
    model.load_state_dict(payload["model"])
    return model.to(device), payload["record"]
