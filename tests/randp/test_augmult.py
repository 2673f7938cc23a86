"""Augmentation multiplicity's views: reflect-padded random crops and flips, per example seed."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from dpvip.randp.augmult import augmult_views, view_offsets


def test_views_are_crops_of_the_padded_image_and_depend_on_the_seed_only():
    images = torch.randn(3, 3, 8, 8)
    views = augmult_views(images, [11, 12, 13], views=4, padding=2)
    assert views.shape == (12, 3, 8, 8)
    padded = F.pad(images, (2,) * 4, mode="reflect")
    for i, seed in enumerate([11, 12, 13]):
        for k, (dy, dx, flip) in enumerate(view_offsets(seed, 4, 2)):
            assert 0 <= dy <= 4 and 0 <= dx <= 4
            expected = padded[i, :, dy : dy + 8, dx : dx + 8]
            torch.testing.assert_close(views[i * 4 + k], expected.flip(-1) if flip else expected)
    # the same seed gives the same views whatever else is in the batch
    again = augmult_views(images[1:2], [12], views=4, padding=2)
    torch.testing.assert_close(again, views[4:8])


def test_views_vary():
    offsets = view_offsets(0, 64, 4)
    assert len({tuple(row) for row in offsets}) > 20
    assert set(offsets[:, 2]) == {0, 1}
