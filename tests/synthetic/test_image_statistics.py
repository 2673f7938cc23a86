"""Generated images are not degenerate: textured (pixel spread), neither black nor white,
and coloured (not grayscale) for every family at a small resolution."""

import numpy as np
import pytest

from dpvip.synthetic import family_class

RESOLUTION, COUNT = 32, 40
CASES = {
    "shaders": ("shaders", {}),
    "shaders_mix6": ("shaders", {"mix": 6}),
    "stylegan_oriented": ("stylegan_oriented", {"block_size": 8}),
    "dead_leaves": ("dead_leaves", {}),
}


@pytest.fixture(scope="module", params=list(CASES))
def batch(request) -> tuple[str, np.ndarray]:
    family, options = CASES[request.param]
    generator = family_class(family)(RESOLUTION, seed=0, **options)
    images = np.stack([image for _, image in generator.images(0, COUNT)])
    assert images.shape == (COUNT, RESOLUTION, RESOLUTION, 3) and images.dtype == np.uint8
    return request.param, images


def test_every_image_has_texture(batch):
    case, images = batch
    stds = images.reshape(COUNT, -1).astype(np.float64).std(axis=1)
    assert stds.min() > 10, f"{case}: image {stds.argmin()} has pixel std {stds.min():.1f}"


def test_images_are_neither_black_nor_white(batch):
    case, images = batch
    brightness = images.reshape(COUNT, -1).mean(axis=1)
    assert ((brightness > 20) & (brightness < 235)).all(), (
        f"{case}: brightness {brightness.min():.1f}..{brightness.max():.1f}"
    )
    channel_means = images.reshape(-1, 3).mean(axis=0)
    assert ((channel_means > 20) & (channel_means < 235)).all(), f"{case}: channel means {channel_means}"


def test_images_are_coloured(batch):
    case, images = batch
    pixels = images.reshape(-1, 3).astype(np.int64)
    # Grayscale output would have R == G == B everywhere; require a clear channel spread.
    spread = (pixels.max(axis=1) - pixels.min(axis=1)).mean()
    assert spread > 10, f"{case}: mean channel spread {spread:.1f}"
    coloured = [(np.ptp(image.reshape(-1, 3).astype(np.int64), axis=1) > 8).mean() > 0.5 for image in images]
    assert np.mean(coloured) > 0.9, f"{case}: {np.mean(coloured):.0%} of images are coloured"
