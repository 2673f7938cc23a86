"""The networks Phase I trains: a GroupNorm wide ResNet with a projection head (`Encoder`),
inside the method that gives the loss of a batch of view pairs (`AlignUniform`, `MoCo`)."""

from __future__ import annotations

import torch
from torch import nn

from dpvip.models.wrn import ProjectionHead, WideResNet
from dpvip.randp.contrastive import align_uniform_loss
from dpvip.randp.moco import MoCo
from dpvip.plan.dprandp_phase1 import Phase1Settings


class Encoder(nn.Module):
    """images -> unit vectors: the projection head on the flattened last feature map."""

    def __init__(self, size: str, image_size: int, hidden: int, out_features: int):
        super().__init__()
        self.backbone = WideResNet(size)
        # Phase I never uses the classifier (Phase II starts a new one from zero); frozen, it
        # is neither decayed nor counted as trained.
        self.backbone.classifier.requires_grad_(False)
        # Two stride-2 stages: the map is image_size / 4 on a side.
        in_features = self.backbone.feature_channels * (image_size // 4) ** 2
        self.head = ProjectionHead(in_features, hidden, out_features)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone.features(images))


class AlignUniform(nn.Module):
    """Wang & Isola's loss on the embeddings of both views (DP-RandP Phase I)."""

    minimum_batch = 2  # uniformity needs a pair

    def __init__(self, encoder: Encoder, alpha: float, t: float):
        super().__init__()
        self.encoder, self.alpha, self.t = encoder, alpha, t

    def loss(self, view1: torch.Tensor, view2: torch.Tensor) -> torch.Tensor:
        # One pass over both views, as in the authors' code (GroupNorm: each image alone).
        z1, z2 = self.encoder(torch.cat([view1, view2])).chunk(2)
        return align_uniform_loss(z1, z2, self.alpha, self.t)


def build_method(settings: Phase1Settings) -> AlignUniform | MoCo:
    """The method's module, initialised from torch's global RNG."""
    s = settings
    encoder = Encoder(s.model, s.image_size, s.projection_hidden, s.projection_out)
    if s.method == "moco":
        return MoCo(encoder, s.projection_out, s.moco_queue, s.moco_momentum, s.moco_temperature)
    return AlignUniform(encoder, s.alpha, s.t)
