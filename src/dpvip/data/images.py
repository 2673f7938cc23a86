"""Decoded, augmented images from shards, each sample's randomness drawn from its own seed."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import torch
from PIL import Image, UnidentifiedImageError
from torch.utils.data import Dataset

from dpvip.data.shard_reader import CorruptSample, ShardReader

if TYPE_CHECKING:
    from torchvision import transforms

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")
# MAE normalises with ImageNet statistics, also on synthetic images.
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def mae_augmentation(image_size: int, crop_scale: tuple[float, float] = (0.2, 1.0)) -> transforms.Compose:
    """MAE pre-training augmentation: RandomResizedCrop (bicubic) and horizontal flip."""
    from torchvision import transforms  # noqa: F811 - imported where used: ~2 s at import

    return transforms.Compose(
        [
            transforms.RandomResizedCrop(
                image_size, scale=crop_scale, interpolation=transforms.InterpolationMode.BICUBIC
            ),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )


def decode_image(sample: dict[str, bytes]) -> Image.Image:
    extension = next((e for e in IMAGE_EXTENSIONS if e in sample), None)
    if extension is None:
        raise CorruptSample(f"sample {sample['__key__']} has no image ({', '.join(IMAGE_EXTENSIONS)})")
    try:
        with Image.open(io.BytesIO(sample[extension])) as image:
            return image.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError) as err:
        raise CorruptSample(f"sample {sample['__key__']}.{extension} cannot be decoded: {err}") from None


class AugmentedImages(Dataset):
    """dataset[(index, seed)] -> (image tensor, mask noise), or a CorruptSample (returned,
    not raised, so the batch goes on and the sample is counted).

    The augmentation and the `mask_patches` uniform values that decide the sample's MAE mask
    are drawn from `seed` alone, so they do not depend on worker, rank or batch.
    """

    def __init__(self, reader: ShardReader, transform, mask_patches: int = 0):
        self.reader, self.transform, self.mask_patches = reader, transform, mask_patches

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, key: tuple[int, int]):
        index, seed = key
        try:
            image = decode_image(self.reader[index])
        except CorruptSample as err:
            return CorruptSample(str(err))
        with torch.random.fork_rng(devices=[]):
            # The CPU generator only: torch.manual_seed also seeds CUDA, which in a CUDA build
            # without a GPU records a stack trace per call (about 1 ms a sample).
            torch.default_generator.manual_seed(seed)
            tensor = self.transform(image)
            noise = torch.rand(self.mask_patches)
        return tensor, noise


def collate_skipping_corrupt(batch: list) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """Stack the good samples; return the corrupt ones' reasons so they are counted."""
    good = [item for item in batch if not isinstance(item, CorruptSample)]
    corrupt = [str(item) for item in batch if isinstance(item, CorruptSample)]
    if not good:
        return torch.empty(0), torch.empty(0), corrupt
    images, noise = zip(*good)
    return torch.stack(images), torch.stack(noise), corrupt
