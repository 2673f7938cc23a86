"""Features of a frozen MAE encoder for linear probing, as a recorded choice.

He et al.'s probe uses the class token after the final LayerNorm. The ViP authors' variant
concatenates the outputs of the last k blocks without the final norm. Both are a
`FeatureChoice`, and the choice is stored with every probe result.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dpvip.errors import DpvipInputError
from dpvip.models.mae import MaskedAutoencoder

POOLINGS = ("cls", "mean")


@dataclass(frozen=True)
class FeatureChoice:
    pooling: str = "cls"  # the class token, or the mean of the patch tokens
    last_blocks: int = 1  # outputs of the last k blocks, concatenated
    final_norm: bool = True  # the encoder's final LayerNorm on each of them

    def check(self, depth: int | None = None) -> None:
        if self.pooling not in POOLINGS:
            raise DpvipInputError(f"feature pooling '{self.pooling}' is not one of {', '.join(POOLINGS)}")
        if self.last_blocks < 1 or (depth is not None and self.last_blocks > depth):
            raise DpvipInputError(f"last_blocks {self.last_blocks} is outside 1..{depth or 'depth'}")

    def width(self, encoder_width: int) -> int:
        return self.last_blocks * encoder_width


@torch.no_grad()
def encoder_features(model: MaskedAutoencoder, images: torch.Tensor, choice: FeatureChoice) -> torch.Tensor:
    """(batch, last_blocks * width) features of `images` (no masking), without gradients."""
    return trainable_features(model, images, choice)


def trainable_features(model: MaskedAutoencoder, images: torch.Tensor, choice: FeatureChoice) -> torch.Tensor:
    """The same features inside the autograd graph, for fine-tuning the encoder."""
    choice.check(len(model.blocks))
    x = model._with_class_token(model.patch_embed(images) + model.pos_embed[:, 1:])
    kept = []
    first_kept = len(model.blocks) - choice.last_blocks
    for position, block in enumerate(model.blocks):
        x = block(x)
        if position >= first_kept:
            kept.append(model.norm(x) if choice.final_norm else x)
    pooled = [tokens[:, 0] if choice.pooling == "cls" else tokens[:, 1:].mean(dim=1) for tokens in kept]
    return torch.cat(pooled, dim=1)


def extract(model: MaskedAutoencoder, data, choice: FeatureChoice, batch_size: int = 256) -> torch.Tensor:
    """Features of every image of `data` (LabelledImages or FolderImages: anything with
    `batches`), in order, with the model in eval mode; images stream through in batches."""
    model.eval()
    device = next(model.parameters()).device
    parts = [encoder_features(model, images.to(device), choice).float().cpu() for images, _ in data.batches(batch_size)]
    return torch.cat(parts) if parts else torch.empty(0, choice.width(model.norm.normalized_shape[0]))
