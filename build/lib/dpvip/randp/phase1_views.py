"""Two random views of each image for Phase I (Wang & Isola's and Baradad et al.'s recipe).

`AugmentedImages` seeds torch's RNG with the sample's seed (a function of run seed, epoch
and index) before calling the transform, and `TwoViews` draws both views one after the
other from that stream: the pair is a pure function of (seed, epoch, index), and the two
views differ because the second continues where the first stopped.
"""

from __future__ import annotations

import torch
from torchvision import transforms

from dpvip.data.images import IMAGENET_MEAN, IMAGENET_STD, AugmentedImages
from dpvip.data.shard_reader import ShardReader


def contrastive_augmentation(image_size: int) -> transforms.Compose:
    """RandomResizedCrop(scale 0.08-1), flip, ColorJitter(0.4, 0.4, 0.4, 0.4) on every view,
    RandomGrayscale(0.2), then ImageNet normalisation."""
    return transforms.Compose(
        [
            transforms.RandomResizedCrop(image_size, scale=(0.08, 1.0)),
            transforms.RandomHorizontalFlip(),
            transforms.ColorJitter(0.4, 0.4, 0.4, 0.4),
            transforms.RandomGrayscale(p=0.2),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )


class TwoViews:
    """image -> tensor (2, channels, size, size): two draws of `transform`."""

    def __init__(self, transform):
        self.transform = transform

    def __call__(self, image) -> torch.Tensor:
        return torch.stack([self.transform(image), self.transform(image)])


def view_pairs(reader: ShardReader, image_size: int) -> AugmentedImages:
    """dataset[(index, seed)] -> (views (2, 3, size, size), empty mask noise), or a
    CorruptSample; batches of it are (batch, 2, 3, size, size)."""
    return AugmentedImages(reader, TwoViews(contrastive_augmentation(image_size)), mask_patches=0)
