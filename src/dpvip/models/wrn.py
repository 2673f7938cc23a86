"""Pre-activation wide ResNets with GroupNorm, for DP-RandP (Tang et al., "Differentially
Private Image Classification by Learning Priors from Random Processes").

DP-RandP uses WRN-16-4 (and WRN-40-4, its Table 12) with GroupNorm of 16 groups in place of
BatchNorm, whose batch statistics would mix examples and break per-example clipping. Phase I
adds `ProjectionHead` (Linear(16384, 4096) GN ReLU Linear(4096, 4096) GN ReLU
Linear(4096, 128), L2-normalised) on the flattened last feature map.

Shapes, checked in tests/models/test_wrn.py: depth d has (d - 4) / 6 blocks per stage; the
stages have 16 * widen * (1, 2, 4) channels at strides 1, 2, 2 after a 16-channel stem. For
WRN-16-4 at 32 px the last stage is 256 channels (not 64) at 8 x 8, so the flattened map
before pooling has 256 * 8 * 8 = 16384 features: the projection head's input.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dpvip.errors import DpvipInputError
from dpvip.models import WRNSize, wrn_size

GROUPS = 16  # GroupNorm groups, as in DP-RandP (every width here is a multiple of 16)


def _norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(GROUPS, channels)


class PreActBlock(nn.Module):
    """GN ReLU conv3x3(stride) GN ReLU conv3x3, plus the input (through a 1x1 conv where the
    shape changes). Each layer is called once per forward, as per-example clipping requires."""

    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.norm1 = _norm(in_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.norm2 = _norm(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.shortcut = None
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Conv2d(in_channels, out_channels, 1, stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.norm1(x))
        # Pre-activation: a projected shortcut takes the normalised input, as in He et al. 2016.
        skip = x if self.shortcut is None else self.shortcut(out)
        out = self.conv1(out)
        out = self.conv2(F.relu(self.norm2(out)))
        return out + skip


class WideResNet(nn.Module):
    """`features(x)`: the last feature map after its GN ReLU, flattened (16384 for WRN-16-4
    at 32 px); `forward(x)`: logits from the spatially averaged map."""

    def __init__(self, size: str | WRNSize = "wrn16_4", num_classes: int = 10, in_channels: int = 3):
        super().__init__()
        size = wrn_size(size) if isinstance(size, str) else size
        if size.depth < 10 or (size.depth - 4) % 6:
            raise DpvipInputError(f"WRN depth must be 6n + 4 with n >= 1, not {size.depth}")
        self.size = size
        stem, *stages = size.widths
        self.stem = nn.Conv2d(in_channels, stem, 3, 1, 1, bias=False)
        blocks, channels = [], stem
        for stage, width in enumerate(stages):
            for k in range(size.blocks_per_stage):
                blocks.append(PreActBlock(channels, width, 2 if stage and not k else 1))
                channels = width
        self.blocks = nn.Sequential(*blocks)
        self.norm = _norm(channels)
        self.feature_channels = channels
        self.classifier = nn.Linear(channels, num_classes)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.norm(self.blocks(self.stem(x))))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.feature_map(x).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.feature_map(x).mean((2, 3)))


class ProjectionHead(nn.Module):
    """DP-RandP Phase I head: Linear GN ReLU Linear GN ReLU Linear, then L2 normalisation
    (the alignment/uniformity loss lives on the unit sphere)."""

    def __init__(self, in_features: int = 16384, hidden: int = 4096, out_features: int = 128):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(in_features, hidden),
            _norm(hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            _norm(hidden),
            nn.ReLU(),
            nn.Linear(hidden, out_features),
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.layers(features), dim=1)
