"""Augmented images: a normalised crop and the mask noise drawn from the sample's seed alone
(leaving the global torch RNG alone); corrupt samples become CorruptSample, which the
collate function drops and reports."""

from __future__ import annotations

import io
import tarfile

import pytest
import torch

from dpvip.data.images import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    AugmentedImages,
    collate_skipping_corrupt,
    decode_image,
    mae_augmentation,
)
from dpvip.data.shard_reader import CorruptSample, ShardReader
from shard_data import shard_paths, small_index, write_index  # noqa: F401  (fixture)

PATCHES = 64  # 32 px images in patches of 4


@pytest.fixture(scope="module")
def images(small_index) -> AugmentedImages:
    return AugmentedImages(ShardReader.from_index(small_index), mae_augmentation(32), PATCHES)


def test_a_sample_is_a_normalised_image_and_its_mask_noise(images):
    image, noise = images[(3, 12345)]
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32
    assert noise.shape == (PATCHES,) and noise.dtype == torch.float32
    # The mask noise is the U[0, 1) draws that follow the augmentation's in the sample's stream.
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(12345)
        images.transform(decode_image(images.reader[3]))
        expected = torch.rand(PATCHES)
    assert torch.equal(noise, expected)
    assert len(set(noise.tolist())) == PATCHES  # independent draws, no repeats
    mean, std = torch.tensor(IMAGENET_MEAN)[:, None, None], torch.tensor(IMAGENET_STD)[:, None, None]
    pixels = (image * std + mean) * 255  # back to the 8-bit values of the cropped image
    assert torch.allclose(pixels, pixels.round(), atol=1e-3)
    assert pixels.min() > -1e-3 and pixels.max() < 255 + 1e-3
    assert image.std() > 0.05  # an image, not a constant


def test_the_seed_alone_decides_the_crop_flip_and_noise(images):
    first, again, other = images[(3, 12345)], images[(3, 12345)], images[(3, 54321)]
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not torch.equal(first[0], other[0])
    assert not torch.equal(first[1], other[1])
    # another sample with the same seed: same noise (it comes from the seed), another image
    neighbour = images[(4, 12345)]
    assert torch.equal(neighbour[1], first[1]) and not torch.equal(neighbour[0], first[0])


def test_the_global_torch_rng_is_left_alone(images):
    torch.manual_seed(7)
    expected = torch.rand(5)
    torch.manual_seed(7)
    images[(0, 99)]
    images[(1, 100)]
    assert torch.equal(torch.rand(5), expected)


@pytest.fixture(scope="module")
def corrupt_reader(small_index, tmp_path_factory) -> ShardReader:
    """Shard 0 with sample 2's png replaced by garbage and sample 6's png left out."""
    folder = tmp_path_factory.mktemp("corrupt")
    with tarfile.open(shard_paths(small_index)[0]) as source, tarfile.open(folder / "corrupt.tar", "w") as sink:
        for member in source:
            if member.name == "000000006.png":
                continue
            data = b"\x89PNG garbage" * 10 if member.name == "000000002.png" else source.extractfile(member).read()
            copy = tarfile.TarInfo(member.name)
            copy.size = len(data)
            sink.addfile(copy, io.BytesIO(data))
    return ShardReader.from_index(write_index(folder, [("corrupt.tar", 10)]))


def test_corrupt_samples_are_returned_as_corrupt_sample(corrupt_reader):
    dataset = AugmentedImages(corrupt_reader, mae_augmentation(32), PATCHES)
    garbage, no_image = dataset[(2, 1)], dataset[(6, 1)]
    assert isinstance(garbage, CorruptSample) and "000000002.png cannot be decoded" in str(garbage)
    assert isinstance(no_image, CorruptSample) and "000000006 has no image" in str(no_image)
    with pytest.raises(CorruptSample):
        decode_image(corrupt_reader[2])


def test_collate_drops_and_reports_corrupt_samples(corrupt_reader):
    dataset = AugmentedImages(corrupt_reader, mae_augmentation(32), PATCHES)
    batch = [dataset[(i, 10 + i)] for i in range(5)]  # sample 2 is corrupt
    stacked, noise, corrupt = collate_skipping_corrupt(batch)
    assert stacked.shape == (4, 3, 32, 32) and noise.shape == (4, PATCHES)
    assert torch.equal(stacked[2], batch[3][0]) and torch.equal(noise[2], batch[3][1])  # order kept
    assert len(corrupt) == 1 and "000000002" in corrupt[0]

    nothing = collate_skipping_corrupt([dataset[(2, 0)], dataset[(6, 0)]])
    assert nothing[0].numel() == 0 and nothing[1].numel() == 0 and len(nothing[2]) == 2
