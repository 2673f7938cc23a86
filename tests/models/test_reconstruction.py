"""Reconstruction panels: visible patches shown as given, masked ones greyed or predicted."""

import numpy as np
import torch

from dpvip.models.mae import MaskedAutoencoder, MAESettings
from dpvip.models.reconstruction import evaluation_inputs, reconstruct


def test_visible_patches_are_the_original_and_masked_patches_are_replaced():
    torch.manual_seed(0)
    model = MaskedAutoencoder(MAESettings("micro", image_size=32, patch_size=4))
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (48, 48, 3), dtype=np.uint8) for _ in range(3)]
    inputs = evaluation_inputs(images, 32)
    assert inputs.shape == (3, 3, 32, 32)
    panel = reconstruct(model, inputs, seed=1)
    assert {key: value.shape for key, value in panel.items()} == {
        "original": (3, 32, 32, 3),
        "masked": (3, 32, 32, 3),
        "reconstruction": (3, 32, 32, 3),
        "loss": (3,),
    }
    mask = model(inputs, generator=torch.Generator().manual_seed(1)).mask  # the same masks
    pixel_mask = mask.reshape(3, 8, 8).repeat_interleave(4, 1).repeat_interleave(4, 2).bool().numpy()
    visible = ~pixel_mask
    assert np.array_equal(panel["masked"][visible], panel["original"][visible])
    assert np.array_equal(panel["reconstruction"][visible], panel["original"][visible])
    # masked patches: one flat grey in the masked input, the prediction in the reconstruction
    assert len(np.unique(panel["masked"][pixel_mask].reshape(-1, 3), axis=0)) == 1
    assert not np.array_equal(panel["reconstruction"][pixel_mask], panel["original"][pixel_mask])
