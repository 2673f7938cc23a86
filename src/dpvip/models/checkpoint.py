"""MAE checkpoints that later stages load: the network's settings travel with its weights,
so a checkpoint can never be loaded into a network of another size."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from dpvip.errors import DpvipInputError, first_line
from dpvip.files import atomic_target
from dpvip.models import MAESettings, mae_size

if TYPE_CHECKING:  # the model (timm) is imported only where one is built
    from dpvip.models.mae import MaskedAutoencoder

FORMAT = "dpvip.mae/1"


def save_atomic(payload: dict, path: str | Path) -> None:
    """torch.save through a temporary file: a crash leaves the previous checkpoint intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_target(path) as partial:
        torch.save(payload, partial)


def load(path: str | Path, device: str | torch.device = "cpu") -> dict:
    """A checkpoint of tensors and plain values (weights_only), or one clear error."""
    path = Path(path)
    if not path.is_file():
        raise DpvipInputError(f"checkpoint {path} does not exist")
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # a truncated or foreign file: say which, in one line
        raise DpvipInputError(f"checkpoint {path} cannot be read: {first_line(err)}") from None


def architecture(settings: MAESettings) -> dict:
    """What shapes the network: the size's widths and depths (decoder depth resolved, so
    'micro' and 'micro' with its default depth written out agree), image and patch size."""
    resolved = mae_size(settings.size, settings.decoder_depth).architecture()
    return {"size": settings.size, **resolved, "image_size": settings.image_size, "patch_size": settings.patch_size}


def save_mae(model: MaskedAutoencoder, path: str | Path, record: dict) -> None:
    """Weights, settings and `record` (what trained it, on what, for how long)."""
    save_atomic(
        {"format": FORMAT, "settings": asdict(model.settings), "model": model.state_dict(), "record": record}, path
    )


def read_mae(path: str | Path) -> dict:
    payload = load(path)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise DpvipInputError(f"{path} is not an MAE checkpoint of dpvip (format {FORMAT})")
    return payload


def load_mae(
    path: str | Path,
    expected: MAESettings | None = None,
    device: str | torch.device = "cpu",
    decoder_may_differ: bool = False,
) -> tuple[MaskedAutoencoder, dict]:
    """(model, record) from `path`; with `expected`, refuse a checkpoint of another shape.

    The model takes the checkpoint's architecture and `expected`'s mask ratio and loss
    settings (a DP stage may mask differently from the synthetic stage it starts from).
    With `decoder_may_differ`, a checkpoint whose decoder depth differs is accepted: every
    tensor of matching name and shape is loaded (the encoder, the decoder's embedding, norm,
    head and first blocks) and the other decoder blocks keep their fresh initialisation;
    the record then lists them under "initialised_fresh".
    """
    payload = read_mae(path)
    stored = payload["settings"]
    settings = MAESettings(**stored)
    fresh: list[str] = []
    if expected is not None:
        have, want = architecture(settings), architecture(expected)
        for key in have:
            if have[key] != want[key] and not (decoder_may_differ and key == "decoder_depth"):
                raise DpvipInputError(f"checkpoint {path} holds an MAE with {key} {have[key]!r}, not {want[key]!r}")
        settings = expected
    from dpvip.models.mae import MaskedAutoencoder

    model = MaskedAutoencoder(settings)
    weights = payload["model"]
    if decoder_may_differ:
        own = model.state_dict()
        fresh = sorted(k for k in own if k not in weights or weights[k].shape != own[k].shape)
        weights = {k: v for k, v in weights.items() if k in own and v.shape == own[k].shape}
        model.load_state_dict(weights, strict=False)
    else:
        model.load_state_dict(weights)
    record = payload["record"] | ({"initialised_fresh": fresh} if fresh else {})
    return model.to(device), record


def load_mae_at(
    path: str | Path, image_size: int | None = None, device: str | torch.device = "cpu"
) -> tuple[MaskedAutoencoder, dict]:
    """(model, record) from `path`, rebuilt for `image_size` inputs (downstream tasks see
    larger images than pre-training; see `encoder_at`)."""
    model, record = load_mae(path, device=device)
    if image_size is None or image_size == model.settings.image_size:
        return model, record
    try:
        from dpvip.models.mae import encoder_at

        return encoder_at(model, image_size), record
    except DpvipInputError as err:
        raise DpvipInputError(f"{path} at {image_size} px: {err}") from None
