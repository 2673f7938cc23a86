"""Checkpoints written atomically (a crash leaves the previous one intact), holding only
tensors and plain values so they load with torch.load(weights_only=True)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch

from dpvip.errors import DpvipInputError, first_line
from dpvip.files import atomic_target


def save_atomic(payload: dict, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_target(path) as partial:
        torch.save(payload, partial)


def load(path: str | Path, device: str | torch.device = "cpu") -> dict:
    path = Path(path)
    if not path.is_file():
        raise DpvipInputError(f"checkpoint {path} does not exist")
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # a truncated or foreign file: say which, in one line
        raise DpvipInputError(f"checkpoint {path} cannot be read: {first_line(err)}") from None


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
