"""What the COCO and ADE20K tests share: a ViTDet small enough for a CPU second, a fresh
micro MAE, and the generated COCO stand-in written to a folder."""

from __future__ import annotations

import torch

from dpvip.evaluate.coco_standin import CocoStandIn, write_split
from dpvip.evaluate.detection import DetectionSettings
from dpvip.models import MAESettings
from dpvip.models.mae import MaskedAutoencoder

QUICK = DetectionSettings(
    iterations=4,
    batch_size=4,
    lr=1e-3,
    warmup_iterations=1,
    image_size=64,
    pyramid_channels=16,
    head_convs=1,
    rois_per_image=16,
    proposals_per_image=20,
    drop_path=0.0,
    score_threshold=0.0,
)


def micro_mae(size: str = "micro", image_size: int = 64) -> MaskedAutoencoder:
    torch.manual_seed(0)
    return MaskedAutoencoder(MAESettings(size, image_size=image_size, patch_size=4))


def write_coco(folder, train_images: int = 6):
    """(folder, train annotations, val annotations) of the stand-in."""
    return (
        folder,
        write_split(CocoStandIn(images=train_images, seed=1), "train", folder),
        write_split(CocoStandIn(images=4, seed=1), "val", folder),
    )
