"""Training state: checkpoints written atomically (`save_atomic`, `load`: the models layer's,
which writes the released weights the same way) and the random generators' states, held as
tensors and plain values so they load with torch.load(weights_only=True)."""

from __future__ import annotations

import random

import numpy as np
import torch

from dpvip.models.checkpoint import load, save_atomic

__all__ = ["load", "restore_rng_states", "rng_states", "save_atomic"]


def rng_states() -> dict:
    kind, keys, position, has_gauss, cached = np.random.get_state()
    states = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "position": position,
            "has_gauss": has_gauss,
            "cached": cached,
        },
        "python": _plain(random.getstate()),
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    numpy = states["numpy"]
    np.random.set_state(
        (numpy["kind"], numpy["keys"].numpy().astype(np.uint32), numpy["position"], numpy["has_gauss"], numpy["cached"])
    )
    random.setstate(_tuples(states["python"]))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def _plain(value):
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
