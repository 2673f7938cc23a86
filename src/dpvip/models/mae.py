"""Masked autoencoder (He et al. 2022) on timm blocks, with an exact per-example loss.

Differences from the reference MAE, all made so that per-example gradients work in every
opacus mode (hooks, ghost clipping, functorch) and nothing fixed is trained by accident:
- the 2-D sin-cos position embeddings are buffers, not parameters: they stay fixed (the
  ViP release trains them under DP, which MAE never intended);
- the class token and the mask token are `nn.Linear(1, width, bias=False)` layers applied
  to an indicator (1 where the token goes). That is the same function as a learned token,
  but lives in a layer opacus has a grad sampler for; bare parameters in a module without
  one make opacus fall back to functorch silently.
Every example draws its own mask from its own noise, and `forward` returns one loss per
example (the mean squared error over that example's masked patches).
"""

from __future__ import annotations

import copy

from dataclasses import dataclass, replace
from functools import partial

import torch
from timm.layers import PatchEmbed, build_sincos2d_pos_embed
from timm.models.vision_transformer import Block
from torch import nn

from dpvip.models import MAESettings, MAESize, mae_size, count_parameters  # noqa: F401 - re-exported


@dataclass
class MAEOutput:
    loss: torch.Tensor  # (batch,) per-example loss
    prediction: torch.Tensor  # (batch, patches, patch*patch*channels), in (normalised) patch space
    mask: torch.Tensor  # (batch, patches), 1 where the patch was masked


def _token_indicator(shape: tuple[int, ...], reference: torch.Tensor) -> torch.Tensor:
    return torch.ones(*shape, 1, dtype=reference.dtype, device=reference.device)


def _sincos_with_class_slot(grid: int, width: int) -> torch.Tensor:
    """(1, 1 + grid*grid, width) fixed position embeddings; the class token's slot is zero."""
    table = build_sincos2d_pos_embed([grid, grid], dim=width)
    return torch.cat([torch.zeros(1, width), table], dim=0).unsqueeze(0)


class MaskedAutoencoder(nn.Module):
    def __init__(self, settings: MAESettings, in_chans: int = 3):
        super().__init__()
        settings.check()
        self.settings = settings
        size: MAESize = mae_size(settings.size, settings.decoder_depth)
        self.size = size
        self.patch_size = settings.patch_size
        self.in_chans = in_chans
        width, dec_width = size.encoder_width, size.decoder_width

        self.patch_embed = PatchEmbed(settings.image_size, settings.patch_size, in_chans, width)
        grid = settings.image_size // settings.patch_size
        self.num_patches = grid * grid
        self.cls_token = nn.Linear(1, width, bias=False)
        self.register_buffer("pos_embed", _sincos_with_class_slot(grid, width), persistent=False)
        norm = partial(nn.LayerNorm, eps=1e-6)  # as MAE
        self.blocks = nn.ModuleList(
            Block(width, size.encoder_heads, size.mlp_ratio, qkv_bias=True, norm_layer=norm)
            for _ in range(size.encoder_depth)
        )
        self.norm = norm(width)

        self.decoder_embed = nn.Linear(width, dec_width)
        self.mask_token = nn.Linear(1, dec_width, bias=False)
        self.register_buffer("decoder_pos_embed", _sincos_with_class_slot(grid, dec_width), persistent=False)
        self.decoder_blocks = nn.ModuleList(
            Block(dec_width, size.decoder_heads, size.mlp_ratio, qkv_bias=True, norm_layer=norm)
            for _ in range(size.decoder_depth)
        )
        self.decoder_norm = norm(dec_width)
        self.decoder_pred = nn.Linear(dec_width, settings.patch_size**2 * in_chans)
        self._initialise()

    def _initialise(self) -> None:
        # MAE's initialisation: xavier-uniform linear layers (the patch projection as one),
        # zero biases, unit LayerNorms, tokens ~ N(0, 0.02).
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        projection = self.patch_embed.proj.weight
        nn.init.xavier_uniform_(projection.view(projection.shape[0], -1))
        nn.init.normal_(self.cls_token.weight, std=0.02)
        nn.init.normal_(self.mask_token.weight, std=0.02)

    # --- patches -------------------------------------------------------------------------
    def patchify(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, patches, p*p*C), patches in row-major order."""
        p, (b, c, h, w) = self.patch_size, images.shape
        x = images.reshape(b, c, h // p, p, w // p, p)
        return torch.einsum("bchpwq->bhwpqc", x).reshape(b, (h // p) * (w // p), p * p * c)

    def unpatchify(self, patches: torch.Tensor) -> torch.Tensor:
        p, b = self.patch_size, patches.shape[0]
        grid = int(round(patches.shape[1] ** 0.5))
        x = patches.reshape(b, grid, grid, p, p, self.in_chans)
        return torch.einsum("bhwpqc->bchpwq", x).reshape(b, self.in_chans, grid * p, grid * p)

    # --- masking -------------------------------------------------------------------------
    def kept_patches(self, mask_ratio: float | None = None) -> int:
        ratio = self.settings.mask_ratio if mask_ratio is None else mask_ratio
        return int(self.num_patches * (1 - ratio))

    def mask_noise(self, batch: int, generator: torch.Generator | None = None, device=None) -> torch.Tensor:
        """Uniform noise whose per-example argsort decides the mask (lowest values are kept)."""
        return torch.rand(batch, self.num_patches, generator=generator, device=device)

    def random_masking(self, x: torch.Tensor, noise: torch.Tensor, mask_ratio: float | None = None):
        """Keep the patches with the lowest noise: (kept tokens, mask, ids to restore order)."""
        b, length, width = x.shape
        keep = self.kept_patches(mask_ratio)
        ids_shuffle = torch.argsort(noise, dim=1)
        ids_restore = torch.argsort(ids_shuffle, dim=1)
        ids_keep = ids_shuffle[:, :keep]
        kept = torch.gather(x, 1, ids_keep.unsqueeze(-1).expand(-1, -1, width))
        mask = torch.ones(b, length, device=x.device, dtype=x.dtype)
        mask[:, :keep] = 0
        return kept, torch.gather(mask, 1, ids_restore), ids_restore

    # --- encoder / decoder ---------------------------------------------------------------
    def _with_class_token(self, tokens: torch.Tensor) -> torch.Tensor:
        cls = self.cls_token(_token_indicator((tokens.shape[0], 1), tokens)) + self.pos_embed[:, :1]
        return torch.cat([cls, tokens], dim=1)

    def encode(self, images: torch.Tensor, noise: torch.Tensor | None = None, mask_ratio: float | None = None):
        """Encoder tokens (class token first). With `noise`, only the kept patches are encoded
        and (tokens, mask, ids_restore) is returned; without, every patch: tokens only."""
        x = self.patch_embed(images) + self.pos_embed[:, 1:]
        mask = ids_restore = None
        if noise is not None:
            x, mask, ids_restore = self.random_masking(x, noise, mask_ratio)
        x = self._with_class_token(x)
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        return x if noise is None else (x, mask, ids_restore)

    def decode(self, tokens: torch.Tensor, mask: torch.Tensor, ids_restore: torch.Tensor) -> torch.Tensor:
        x = self.decoder_embed(tokens)
        b, kept, width = x.shape[0], x.shape[1] - 1, x.shape[2]
        # Visible tokens back in patch order, zeros where masked, plus the mask token there.
        padded = torch.cat([x[:, 1:], x.new_zeros(b, self.num_patches - kept, width)], dim=1)
        unshuffled = torch.gather(padded, 1, ids_restore.unsqueeze(-1).expand(-1, -1, width))
        patches = unshuffled + self.mask_token(mask.unsqueeze(-1))
        x = torch.cat([x[:, :1], patches], dim=1) + self.decoder_pos_embed
        for block in self.decoder_blocks:
            x = block(x)
        return self.decoder_pred(self.decoder_norm(x))[:, 1:]

    def per_example_loss(self, images: torch.Tensor, prediction: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Mean squared error over each example's masked patches (pixels normalised per patch
        with norm_pix_loss): a (batch,) vector whose mean is MAE's batch loss."""
        target = self.patchify(images)
        if self.settings.norm_pix_loss:
            mean = target.mean(dim=-1, keepdim=True)
            var = target.var(dim=-1, keepdim=True)
            target = (target - mean) / (var + 1.0e-6) ** 0.5
        per_patch = ((prediction - target) ** 2).mean(dim=-1)
        return (per_patch * mask).sum(dim=1) / mask.sum(dim=1)

    def forward(
        self, images: torch.Tensor, noise: torch.Tensor | None = None, generator: torch.Generator | None = None
    ) -> MAEOutput:
        """Mask, encode, decode and score each example; `noise` (batch, patches) fixes the
        masks, otherwise it is drawn from `generator`."""
        if noise is None:
            noise = self.mask_noise(images.shape[0], generator, images.device)
        tokens, mask, ids_restore = self.encode(images, noise)
        prediction = self.decode(tokens, mask, ids_restore)
        return MAEOutput(self.per_example_loss(images, prediction, mask), prediction, mask)


def encoder_at(mae: MaskedAutoencoder, image_size: int) -> MaskedAutoencoder:
    """A copy of `mae` taking `image_size` inputs. The sin-cos positions are a buffer that is
    not saved, so the rebuilt network has them for its own grid and every weight loads."""
    if mae.settings.image_size == image_size:
        return copy.deepcopy(mae)
    settings = replace(mae.settings, image_size=image_size)
    settings.check()
    rebuilt = MaskedAutoencoder(settings, in_chans=mae.in_chans)
    rebuilt.load_state_dict(mae.state_dict())
    return rebuilt.to(next(mae.parameters()).device)
