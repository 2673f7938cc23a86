"""Frozen feature extractors for DP transfer, and the crops of the images they see.

Two families of pre-trained networks feed the private classifiers:
- an MAE encoder (ViP): "prelogits" is the class token after the final LayerNorm, the
  representation whose last layer Mehta et al. fine-tune with DP; "blocks4" is DP-RandP's
  ImageNet probe (their Appendix G): every block's patch tokens average-pooled to a 2x2 grid
  and concatenated over the blocks;
- a DP-RandP Phase I wide ResNet: "prelogits" is the pooled last feature map (the
  classifier's input); "projection1" is the projection head's first Linear-GroupNorm-ReLU
  block, the "third-to-last layer" DP-RandP probes (4096 features in the paper).

Training crops follow Mehta et al. (after Kolesnikov et al.): an inception crop and a
horizontal flip, drawn per example from (seed, view, index), so view v of example i is the
same in any batch and a feature cache can be resumed or extended shard by shard.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.transforms.v2 import functional as TF

from dpvip.errors import DpvipInputError
from dpvip.evaluate.features import FeatureChoice, encoder_features
from dpvip.models.checkpoint import load, load_mae_at
from dpvip.models.mae import MaskedAutoencoder
from dpvip.models.wrn import ProjectionHead, WideResNet
from dpvip.randp.backbone import load_backbone
from dpvip.seeds import derive

RECIPES = {"mae": ("prelogits", "blocks4"), "wrn": ("prelogits", "projection1")}
CROPS = ("center", "inception")
POOLED_GRID = 2  # DP-RandP pools each block's patch tokens to 2 x 2
CROP_SCALE, CROP_RATIO = (0.08, 1.0), (3 / 4, 4 / 3)  # the inception crop


class Extractor:
    """A frozen network in eval mode; called on (batch, 3, image_size, image_size) images, it
    returns (batch, width) features without gradients, on its device."""

    def __init__(
        self,
        kind: str,
        recipe: str,
        checkpoint: str,
        image_size: int,
        network: nn.Module,
        read: Callable[[torch.Tensor], torch.Tensor],
        width: int,
        record: dict,
    ):
        self.kind, self.recipe, self.checkpoint, self.image_size = kind, recipe, checkpoint, image_size
        self.network = network.eval().requires_grad_(False)
        self.read, self.width, self.record = read, width, record
        self.device = next(network.parameters()).device

    @torch.no_grad()
    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        expected = (3, self.image_size, self.image_size)
        if images.ndim != 4 or tuple(images.shape[1:]) != expected:
            raise DpvipInputError(
                f"the {self.kind} {self.recipe} extractor takes (batch, {', '.join(map(str, expected))}) images, "
                f"not {tuple(images.shape)}"
            )
        return self.read(images.to(self.device))


def load_extractor(
    kind: str, checkpoint: str | Path, recipe: str, image_size: int, device: str | torch.device = "cpu"
) -> Extractor:
    """The `recipe` features of the `kind` network stored at `checkpoint`, for `image_size` px."""
    if kind not in RECIPES:
        raise DpvipInputError(f"extractor kind '{kind}' is not one of {', '.join(RECIPES)}")
    if recipe not in RECIPES[kind]:
        raise DpvipInputError(f"{kind} feature recipe '{recipe}' is not one of {', '.join(RECIPES[kind])}")
    if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 1:
        raise DpvipInputError(f"image_size {image_size!r} must be a positive integer")
    loader = _load_mae if kind == "mae" else _load_wrn
    return loader(str(checkpoint), recipe, image_size, device)


# --- MAE encoders ---------------------------------------------------------------------------
def pool_patch_tokens(tokens: torch.Tensor, grid: tuple[int, int], pooled: int = POOLED_GRID) -> torch.Tensor:
    """(batch, pooled * pooled * width): patch tokens (batch, h * w, width), in row-major
    order on their (h, w) grid, average-pooled (adaptively) to a pooled x pooled grid; the
    pooled tokens are laid end to end in row-major order."""
    batch, _, width = tokens.shape
    maps = tokens.transpose(1, 2).reshape(batch, width, *grid)
    return F.adaptive_avg_pool2d(maps, pooled).permute(0, 2, 3, 1).flatten(1)


def mae_blocks4(model: MaskedAutoencoder, images: torch.Tensor) -> torch.Tensor:
    """(batch, depth * 4 * width): every block's output (no final norm), its patch tokens
    pooled to 2 x 2, concatenated in block order (the encoder runs as in
    `dpvip.evaluate.features.trainable_features`, unmasked)."""
    grid = tuple(model.patch_embed.grid_size)
    x = model._with_class_token(model.patch_embed(images) + model.pos_embed[:, 1:])
    pooled = []
    for block in model.blocks:
        x = block(x)
        pooled.append(pool_patch_tokens(x[:, 1:], grid))
    return torch.cat(pooled, dim=1)


def _load_mae(checkpoint: str, recipe: str, image_size: int, device) -> Extractor:
    model, record = load_mae_at(checkpoint, image_size, device)
    width, depth, grid = model.norm.normalized_shape[0], len(model.blocks), tuple(model.patch_embed.grid_size)
    if recipe == "prelogits":
        choice = FeatureChoice(pooling="cls", last_blocks=1, final_norm=True)
        return Extractor(
            "mae", recipe, checkpoint, image_size, model, partial(encoder_features, model, choice=choice), width, record
        )
    if min(grid) < POOLED_GRID:
        raise DpvipInputError(
            f"blocks4 features of {checkpoint} need a patch grid of at least {POOLED_GRID} x {POOLED_GRID}, "
            f"not {grid} at {image_size} px"
        )
    return Extractor(
        "mae",
        recipe,
        checkpoint,
        image_size,
        model,
        partial(mae_blocks4, model),
        depth * POOLED_GRID**2 * width,
        record,
    )


# --- DP-RandP Phase I wide ResNets ------------------------------------------------------------
def wrn_prelogits(backbone: WideResNet, images: torch.Tensor) -> torch.Tensor:
    """(batch, channels): the last feature map, averaged over space (the classifier's input)."""
    return backbone.feature_map(images).mean((2, 3))


def wrn_projection1(backbone: WideResNet, block: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """(batch, hidden): the projection head's first Linear-GroupNorm-ReLU block on the
    flattened last feature map."""
    return block(backbone.features(images))


def _projection_block(checkpoint: str, backbone: WideResNet, image_size: int) -> nn.Module:
    """The stored projection head's first block, after checking that `image_size` images give
    the feature map its first Linear was trained on."""
    head = load(checkpoint).get("head")
    if not isinstance(head, dict) or not {"layers.0.weight", "layers.3.weight", "layers.6.weight"} <= head.keys():
        raise DpvipInputError(f"{checkpoint} holds no DP-RandP projection head")
    (hidden, in_features), (out_features, _) = head["layers.0.weight"].shape, head["layers.6.weight"].shape
    side = math.isqrt(in_features // backbone.feature_channels)
    if side * side * backbone.feature_channels != in_features:
        raise DpvipInputError(
            f"{checkpoint}: its projection head takes {in_features} features, "
            f"not a square map of {backbone.feature_channels} channels"
        )
    # Phase I trains at a multiple of 4 px, and its two stride-2 stages leave a map a quarter
    # of that on a side; other sizes give another map (or the same one at another scale).
    if image_size != 4 * side:
        raise DpvipInputError(
            f"projection1 features of {checkpoint} need {4 * side} px images (the size Phase I trained on), "
            f"not {image_size}"
        )
    projection = ProjectionHead(in_features, hidden, out_features)
    projection.load_state_dict(head)
    return projection.layers[:3]


def _load_wrn(checkpoint: str, recipe: str, image_size: int, device) -> Extractor:
    backbone, record = load_backbone(checkpoint, 1, device)  # the (zero) classifier is unused
    if recipe == "prelogits":
        return Extractor(
            "wrn",
            recipe,
            checkpoint,
            image_size,
            backbone,
            partial(wrn_prelogits, backbone),
            backbone.feature_channels,
            record,
        )
    block = _projection_block(checkpoint, backbone, image_size).to(device)
    network = nn.ModuleList([backbone, block])
    return Extractor(
        "wrn",
        recipe,
        checkpoint,
        image_size,
        network,
        partial(wrn_projection1, backbone, block),
        block[0].out_features,
        record,
    )


# --- crops ----------------------------------------------------------------------------------
def _crop_box(height: int, width: int, generator: torch.Generator) -> tuple[int, int, int, int]:
    """(top, left, height, width) of an inception crop: torchvision's RandomResizedCrop
    parameters (10 tries, then the centre at the nearest allowed ratio), drawn from
    `generator` rather than torch's global generator."""
    area, log_ratio = height * width, (math.log(CROP_RATIO[0]), math.log(CROP_RATIO[1]))
    for _ in range(10):
        target_area = area * torch.empty(1).uniform_(*CROP_SCALE, generator=generator).item()
        aspect = math.exp(torch.empty(1).uniform_(*log_ratio, generator=generator).item())
        w, h = int(round(math.sqrt(target_area * aspect))), int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = int(torch.randint(0, height - h + 1, (1,), generator=generator))
            left = int(torch.randint(0, width - w + 1, (1,), generator=generator))
            return top, left, h, w
    ratio = width / height
    if ratio < CROP_RATIO[0]:
        w, h = width, int(round(width / CROP_RATIO[0]))
    elif ratio > CROP_RATIO[1]:
        w, h = int(round(height * CROP_RATIO[1])), height
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def crop_views(
    images: torch.Tensor, image_size: int, crop: str, view: int, indices: torch.Tensor, seed: int
) -> torch.Tensor:
    """(n, 3, image_size, image_size) crops of `images` (n, 3, L, L), normalised and loaded at
    a size L >= image_size. "center" is deterministic; "inception" draws, for example
    `indices[k]`, a RandomResizedCrop (scale 0.08..1, ratio 3/4..4/3) and a flip with
    probability 1/2 from the seed derive(seed, view, index)."""
    if crop not in CROPS:
        raise DpvipInputError(f"crop '{crop}' is not one of {', '.join(CROPS)}")
    if images.ndim != 4:
        raise DpvipInputError(f"crop_views takes (n, 3, size, size) images, not {tuple(images.shape)}")
    if crop == "center":
        if min(images.shape[-2:]) < image_size:
            raise DpvipInputError(
                f"images of {tuple(images.shape[-2:])} px are smaller than the {image_size} px centre crop"
            )
        return TF.center_crop(images, [image_size, image_size])
    if len(indices) != len(images):
        raise DpvipInputError(f"crop_views got {len(indices)} indices for {len(images)} images")
    if view < 0 or seed < 0:
        raise DpvipInputError(f"view {view} and seed {seed} must be non-negative")
    generator = torch.Generator()
    height, width = images.shape[-2:]
    crops = []
    for image, index in zip(images, indices.tolist()):
        generator.manual_seed(derive(seed, view, int(index)))
        top, left, h, w = _crop_box(height, width, generator)
        out = TF.resized_crop(image, top, left, h, w, [image_size, image_size], antialias=True)
        crops.append(TF.horizontal_flip(out) if torch.rand(1, generator=generator).item() < 0.5 else out)
    return torch.stack(crops) if crops else images.new_empty(0, images.shape[1], image_size, image_size)
