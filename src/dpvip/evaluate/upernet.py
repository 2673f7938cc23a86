"""UPerNet (Xiao et al. 2018) on a plain MAE encoder, as MAE evaluates segmentation.

He et al. (2022) take the outputs of ViT-B blocks 4, 6, 8 and 12, turn them into a feature
pyramid at strides 4, 8, 16 and 32 (two 2x deconvolutions, one, none, a 2x max-pool), and
put UPerNet on it: a pyramid pooling module (bins 1, 2, 3, 6) on the coarsest level, FPN
laterals with a top-down path, all levels fused at stride 4, a 1x1 classifier; plus an
auxiliary FCN head on the stride-16 level during training. Here the taps are the blocks
at 1/3, 1/2, 2/3 and all of the depth, so shallow CPU encoders (depth 2 or 4) work too;
with patch p the pyramid's strides are p/4, p/2, p and 2p.

Choices of ours: GroupNorm in the neck and heads instead of (synchronised) BatchNorm, so a
batch of one (the remainder of an epoch) trains like any other; the encoder keeps its
absolute sin-cos positions (MAE switches to relative position bias for segmentation) and
its final LayerNorm is not used (the taps are raw block outputs, as in mmseg's MAE).
"""

from __future__ import annotations


import torch
import torch.nn.functional as F
from torch import nn

from dpvip.models.mae import MaskedAutoencoder

TAP_FRACTIONS = (1 / 3, 1 / 2, 2 / 3, 1)
POOL_SCALES = (1, 2, 3, 6)


def tap_blocks(depth: int) -> tuple[int, ...]:
    """Block numbers (1-based) whose outputs feed the four pyramid levels: 4, 6, 8, 12 for
    depth 12; 1, 1, 1, 2 for depth 2 (a block may feed several levels)."""
    return tuple(max(1, int(depth * fraction + 0.5)) for fraction in TAP_FRACTIONS)


def group_norm(channels: int) -> nn.GroupNorm:
    # 32 groups as usual, but at least 8 channels a group for narrow CPU heads.
    groups = max(1, min(32, channels // 8))
    while channels % groups:
        groups -= 1
    return nn.GroupNorm(groups, channels)


def conv_norm_relu(in_channels: int, out_channels: int, kernel: int) -> nn.Sequential:
    conv = nn.Conv2d(in_channels, out_channels, kernel, padding=kernel // 2, bias=False)  # the norm has the bias
    return nn.Sequential(conv, group_norm(out_channels), nn.ReLU(inplace=True))


def resize_to(x: torch.Tensor, size: tuple[int, int] | torch.Size) -> torch.Tensor:
    return F.interpolate(x, size=tuple(size), mode="bilinear", align_corners=False)


class MultiScaleNeck(nn.Module):
    """Four maps at one stride -> strides x/4, x/2, x, 2x (MAE's pyramid for a plain ViT)."""

    def __init__(self, width: int):
        super().__init__()
        self.up4 = nn.Sequential(
            nn.ConvTranspose2d(width, width, 2, stride=2),
            group_norm(width),
            nn.GELU(),
            nn.ConvTranspose2d(width, width, 2, stride=2),
        )
        self.up2 = nn.ConvTranspose2d(width, width, 2, stride=2)
        self.same = nn.Identity()
        self.down2 = nn.MaxPool2d(2)

    def forward(self, maps: list[torch.Tensor]) -> list[torch.Tensor]:
        return [branch(x) for branch, x in zip((self.up4, self.up2, self.same, self.down2), maps)]


class PyramidPooling(nn.Module):
    """PSPNet's module: the map average-pooled to 1x1 ... 6x6 bins, each projected, upsampled
    back and concatenated with the map, then fused by a 3x3 convolution."""

    def __init__(self, in_channels: int, channels: int, scales: tuple[int, ...] = POOL_SCALES):
        super().__init__()
        self.stages = nn.ModuleList(
            nn.Sequential(nn.AdaptiveAvgPool2d(s), conv_norm_relu(in_channels, channels, 1)) for s in scales
        )
        self.bottleneck = conv_norm_relu(in_channels + len(scales) * channels, channels, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = [resize_to(stage(x), x.shape[-2:]) for stage in self.stages]
        return self.bottleneck(torch.cat([x, *pooled], dim=1))


class UPerHead(nn.Module):
    """Pyramid pooling on the coarsest level, FPN (1x1 laterals, top-down sums, 3x3
    smoothing) on the others, every level upsampled to the finest and fused, classified."""

    def __init__(self, in_channels: int, channels: int, classes: int, levels: int = 4, dropout: float = 0.1):
        super().__init__()
        self.pooling = PyramidPooling(in_channels, channels)
        self.laterals = nn.ModuleList(conv_norm_relu(in_channels, channels, 1) for _ in range(levels - 1))
        self.smooth = nn.ModuleList(conv_norm_relu(channels, channels, 3) for _ in range(levels - 1))
        self.fuse = conv_norm_relu(levels * channels, channels, 3)
        self.classify = nn.Sequential(nn.Dropout2d(dropout), nn.Conv2d(channels, classes, 1))

    def forward(self, levels: list[torch.Tensor]) -> torch.Tensor:
        laterals = [conv(x) for conv, x in zip(self.laterals, levels[:-1])] + [self.pooling(levels[-1])]
        for finer in range(len(laterals) - 2, -1, -1):  # top-down: coarse context into finer levels
            laterals[finer] = laterals[finer] + resize_to(laterals[finer + 1], laterals[finer].shape[-2:])
        outputs = [smooth(x) for smooth, x in zip(self.smooth, laterals[:-1])] + [laterals[-1]]
        finest = outputs[0].shape[-2:]
        fused = self.fuse(torch.cat([outputs[0]] + [resize_to(x, finest) for x in outputs[1:]], dim=1))
        return self.classify(fused)


class FCNHead(nn.Module):
    """The auxiliary head: one 3x3 convolution and a classifier on one pyramid level."""

    def __init__(self, in_channels: int, channels: int, classes: int, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.Sequential(
            conv_norm_relu(in_channels, channels, 3), nn.Dropout2d(dropout), nn.Conv2d(channels, classes, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class Segmenter(nn.Module):
    """An MAE encoder, the multi-scale neck, UPerNet and (for training) the FCN auxiliary head.
    `forward` gives (batch, classes, H, W) logits at the input's size. The MAE's decoder and
    final norm take no part and are frozen."""

    AUX_LEVEL = 2  # the stride-16 level at paper scale (the encoder's own grid)

    def __init__(self, mae: MaskedAutoencoder, classes: int, channels: int, aux_channels: int = 0):
        super().__init__()
        self.mae = mae
        for name, param in mae.named_parameters():
            param.requires_grad_(not name.startswith(("decoder", "mask_token", "norm.")))
        width = mae.norm.normalized_shape[0]
        self.taps = tap_blocks(len(mae.blocks))
        self.neck = MultiScaleNeck(width)
        self.head = UPerHead(width, channels, classes)
        self.aux_head = FCNHead(width, aux_channels, classes) if aux_channels else None
        self.epoch_losses: list[float] = []  # filled by training, recorded with the scores

    def group_matcher(self, coarse: bool = False) -> dict:
        """Layers for timm's layer-wise lr decay: embeddings first, then each block; the neck
        and heads are unmatched, so timm puts them in the top layer (full lr), as BEiT/MAE do."""
        return {"stem": r"^mae\.(?:cls_token|patch_embed)", "blocks": r"^mae\.blocks\.(\d+)"}

    def pyramid(self, images: torch.Tensor) -> list[torch.Tensor]:
        mae = self.mae
        x = mae._with_class_token(mae.patch_embed(images) + mae.pos_embed[:, 1:])
        batch, grid = images.shape[0], images.shape[-1] // mae.patch_size
        maps = []
        for number, block in enumerate(mae.blocks, start=1):
            x = block(x)
            for _ in range(self.taps.count(number)):
                maps.append(x[:, 1:].transpose(1, 2).reshape(batch, -1, grid, grid))  # class token dropped
            if len(maps) == len(self.taps):
                break
        return self.neck(maps)

    def logits(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(main logits, auxiliary logits or None), both upsampled to the input's size."""
        levels = self.pyramid(images)
        size = images.shape[-2:]
        main = resize_to(self.head(levels), size)
        aux = (
            resize_to(self.aux_head(levels[self.AUX_LEVEL]), size)
            if self.aux_head is not None and self.training
            else None
        )
        return main, aux

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.logits(images)[0]
