"""ViTDet (Li et al. 2022) on a plain MAE encoder: Mask R-CNN with a simple feature pyramid.

ViP Table 4 reports COCO box and mask AP of ViTDet-B (detectron2's Mask R-CNN config) on the
ViP encoder. ViTDet keeps the pre-trained ViT plain: the last block's patch tokens form one
map of stride p (the patch size), and the *simple feature pyramid* makes four levels from
it at 4x, 2x, 1x and 1/2x that map's resolution (two 2x2 deconvolutions with a LayerNorm
and GELU between, one deconvolution, the map itself, a 2x2 max-pool), each followed by a
1x1 and a 3x3 convolution to 256 channels with channel LayerNorms; a stride-2 subsampling
of the coarsest level adds a fifth level for the RPN only. The heads are ViTDet's: a
two-conv RPN, a box head of four 3x3 convs and one 1024-wide fc, a mask head of four convs,
all with LayerNorm; anchors of one size (8x the stride: 32 ... 512 at p = 16) and three
aspect ratios per level.

Here the heads are torchvision's `MaskRCNN` pieces and the pyramid is built with the
patch size scaled into every stride-tied number (levels p/4 ... 2p, anchors 8x the stride,
the RoI level rule maps a 14p-px box to the p-stride level as FPN maps 224 px to stride 16),
so a patch-4 CPU model is ViTDet shrunk four-fold. The pyramid's channels, the head depth
and the RoI/proposal counts are arguments (ViTDet: 256, 4, 512, 1000) so CPU runs can be
lighter. Differences from ViTDet, all ours:
- attention stays global in every block, as the MAE was pre-trained (ViTDet windows 8 of
  12 blocks with 14x14 windows and adds relative position biases, for memory at 1024 px);
- the encoder keeps its fixed sin-cos positions, recomputed for the detection grid
  (ViTDet interpolates the pre-trained table); the class token and final LayerNorm are
  not used, as in ViTDet's ViT;
- torchvision's RoIAlign is the unaligned (v1) one with 2x2 samples a bin (torchvision's
  Mask R-CNN); detectron2 uses ROIAlignV2 with an adaptive count, slow on CPU.
The paper-scale run uses detectron2 itself (see `detectron2_convert`).
"""

from __future__ import annotations

import math
from collections import OrderedDict

import torch
import torch.nn.functional as F
from timm.layers import DropPath, LayerNorm2d
from torch import nn
from torchvision.models.detection import MaskRCNN
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.faster_rcnn import FastRCNNConvFCHead, FastRCNNPredictor
from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor
from torchvision.models.detection.rpn import RPNHead
from torchvision.ops import MultiScaleRoIAlign

from dpvip.data.images import IMAGENET_MEAN, IMAGENET_STD
from dpvip.errors import DpvipInputError
from dpvip.models.mae import encoder_at
from dpvip.models.mae import MaskedAutoencoder

PYRAMID_SCALES = (4.0, 2.0, 1.0, 0.5)  # of the ViT map's resolution, finest first
ANCHOR_SIZE_PER_STRIDE = 8  # ViTDet/FPN: anchor 32 at stride 4 ... 512 at stride 64
ASPECT_RATIOS = (0.5, 1.0, 2.0)
FC_PER_CHANNEL = 4  # the box head's fc is 1024 wide at 256 pyramid channels
POOL_LEVEL = "pool"  # torchvision's name for the RPN-only top level


def channel_norm(channels: int) -> nn.Module:
    """LayerNorm over the channels of each position, as ViTDet's "LN" (eps 1e-6)."""
    return LayerNorm2d(channels, eps=1e-6)


class PlainViT(nn.Module):
    """The MAE encoder as ViTDet's backbone: no masking, no class token, no final norm; the
    last block's patch tokens as a (batch, width, grid, grid) map of stride `patch_size`.
    Inputs smaller than `image_size` are padded bottom-right (ViTDet's square padding)."""

    def __init__(self, mae: MaskedAutoencoder, image_size: int, drop_path: float = 0.0):
        super().__init__()
        encoder = encoder_at(mae, image_size)
        self.image_size, self.patch_size = image_size, encoder.patch_size
        self.width = encoder.patch_embed.proj.out_channels
        self.patch_embed, self.blocks = encoder.patch_embed, encoder.blocks
        self.register_buffer("pos_embed", encoder.pos_embed[:, 1:].clone(), persistent=False)
        depth = len(self.blocks)
        for position, block in enumerate(self.blocks):  # stochastic depth rising linearly, as ViTDet
            rate = drop_path * position / max(1, depth - 1)
            block.drop_path1 = DropPath(rate) if rate > 0 else nn.Identity()
            block.drop_path2 = DropPath(rate) if rate > 0 else nn.Identity()

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        height, width = images.shape[-2:]
        if height > self.image_size or width > self.image_size:
            raise ValueError(f"a {height}x{width} batch does not fit the detector's {self.image_size} px input")
        images = F.pad(images, (0, self.image_size - width, 0, self.image_size - height))
        x = self.patch_embed(images) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        grid = self.image_size // self.patch_size
        return x.transpose(1, 2).reshape(len(images), self.width, grid, grid)


def _resampling(scale: float, width: int) -> tuple[list[nn.Module], int]:
    """ViTDet's change of resolution for one level: (layers, channels out)."""
    if scale == 4.0:
        return [
            nn.ConvTranspose2d(width, width // 2, 2, stride=2),
            channel_norm(width // 2),
            nn.GELU(),
            nn.ConvTranspose2d(width // 2, width // 4, 2, stride=2),
        ], width // 4
    if scale == 2.0:
        return [nn.ConvTranspose2d(width, width // 2, 2, stride=2)], width // 2
    if scale == 1.0:
        return [], width
    return [nn.MaxPool2d(2, stride=2)], width


class SimpleFeaturePyramid(nn.Module):
    """Levels "p<k>" (stride 2^k) from the ViT map at 4x, 2x, 1x and 1/2x its resolution, all
    with `channels` channels, plus the "pool" level (the coarsest, subsampled 2x) for the RPN."""

    def __init__(self, net: PlainViT, channels: int):
        super().__init__()
        patch = net.patch_size
        if patch < 4 or patch & (patch - 1):
            raise DpvipInputError(
                f"ViTDet's pyramid needs a patch size that is a power of two >= 4 (strides p/4 ... 2p), not {patch}"
            )
        if net.width % 4:
            raise DpvipInputError(f"ViTDet's pyramid needs an encoder width divisible by 4, not {net.width}")
        self.net, self.out_channels = net, channels  # `out_channels` is what MaskRCNN asks of a backbone
        self.strides: dict[str, int] = {}
        self.levels = nn.ModuleDict()
        for scale in PYRAMID_SCALES:
            stride = int(patch / scale)
            layers, width = _resampling(scale, net.width)
            # The norms carry the shift, so the convs have no bias (as detectron2 with "LN").
            layers += [
                nn.Conv2d(width, channels, 1, bias=False),
                channel_norm(channels),
                nn.Conv2d(channels, channels, 3, padding=1, bias=False),
                channel_norm(channels),
            ]
            name = f"p{int(math.log2(stride))}"
            self.levels[name] = nn.Sequential(*layers)
            self.strides[name] = stride
        self.strides[POOL_LEVEL] = 4 * patch

    def forward(self, images: torch.Tensor) -> OrderedDict[str, torch.Tensor]:
        feature = self.net(images)
        levels = OrderedDict((name, stage(feature)) for name, stage in self.levels.items())
        levels[POOL_LEVEL] = F.max_pool2d(next(reversed(levels.values())), kernel_size=1, stride=2)
        return levels


class ViTDet(MaskRCNN):
    """torchvision's Mask R-CNN on a simple feature pyramid over a plain MAE encoder."""

    def group_matcher(self, coarse: bool = False) -> dict:
        """Layers for timm's layer-wise lr decay: the patch embedding, then each block; the
        pyramid and heads are unmatched, so they get the full lr (as ViTDet's decay rule)."""
        return {"stem": r"^backbone\.net\.patch_embed", "blocks": r"^backbone\.net\.blocks\.(\d+)"}


def build_vitdet(
    mae: MaskedAutoencoder,
    classes: int,
    image_size: int,
    channels: int = 256,
    head_convs: int = 4,
    drop_path: float = 0.0,
    rois_per_image: int = 512,
    proposals_per_image: int = 1000,
    score_threshold: float = 0.05,
) -> ViTDet:
    """Mask R-CNN for `classes` categories (plus background) on a copy of `mae`'s encoder,
    rebuilt for `image_size` px inputs: images are resized so their longer side is
    `image_size`, normalised with ImageNet's mean and std (once, here), padded square.
    The box head has `head_convs` 3x3 convs and one fc, the mask head `head_convs` convs
    (ViTDet: 4 each). Detections scoring under `score_threshold` are dropped (detectron2:
    0.05); at most 100 an image are kept, as COCO's AP counts."""
    if min(classes, channels, rois_per_image, proposals_per_image) < 1 or head_convs < 0:
        raise DpvipInputError(
            "ViTDet needs classes, channels, rois_per_image, proposals_per_image >= 1 and head_convs >= 0 "
            f"(got {classes}, {channels}, {rois_per_image}, {proposals_per_image}, {head_convs})"
        )
    backbone = SimpleFeaturePyramid(PlainViT(mae, image_size, drop_path), channels)
    patch = backbone.net.patch_size
    roi_levels = [name for name in backbone.strides if name != POOL_LEVEL]
    anchors = AnchorGenerator(
        sizes=tuple((ANCHOR_SIZE_PER_STRIDE * stride,) for stride in backbone.strides.values()),
        aspect_ratios=(ASPECT_RATIOS,) * len(backbone.strides),
    )

    def roi_align(output_size: int) -> MultiScaleRoIAlign:
        # FPN's level rule (a 224 px box to stride 16 = ViT-B's patch), scaled with the patch.
        return MultiScaleRoIAlign(
            roi_levels, output_size, sampling_ratio=2, canonical_scale=14 * patch, canonical_level=int(math.log2(patch))
        )

    fc = FC_PER_CHANNEL * channels
    return ViTDet(
        backbone,
        min_size=image_size,
        max_size=image_size,
        image_mean=list(IMAGENET_MEAN),
        image_std=list(IMAGENET_STD),
        size_divisible=image_size,  # pads every batch to image_size x image_size
        rpn_anchor_generator=anchors,
        rpn_head=RPNHead(channels, len(ASPECT_RATIOS), conv_depth=2),
        rpn_pre_nms_top_n_train=2 * proposals_per_image,  # per level; detectron2: 2000 train, 1000 test
        rpn_pre_nms_top_n_test=proposals_per_image,
        rpn_post_nms_top_n_train=proposals_per_image,
        rpn_post_nms_top_n_test=proposals_per_image,
        box_roi_pool=roi_align(7),
        box_head=FastRCNNConvFCHead((channels, 7, 7), [channels] * head_convs, [fc], norm_layer=channel_norm),
        box_predictor=FastRCNNPredictor(fc, classes + 1),
        box_batch_size_per_image=rois_per_image,
        box_score_thresh=score_threshold,
        box_detections_per_img=100,
        mask_roi_pool=roi_align(14),
        mask_head=MaskRCNNHeads(channels, [channels] * head_convs, 1, norm_layer=channel_norm),
        mask_predictor=MaskRCNNPredictor(channels, channels, classes + 1),
    )
