"""Frozen feature extractors: every (kind, recipe) gives (batch, width) features; blocks4 is
each block's patch-token grid pooled to 2x2; projection1 is the projection head's first
Linear-GroupNorm-ReLU; bad kinds, recipes, files and sizes are refused in one line. Crops:
the centre crop is the central window; an inception crop of (view, index) does not depend
on the batch it is drawn in, and views differ."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from dpvip.errors import DpvipInputError
from dpvip.models.checkpoint import save_mae
from dpvip.models.mae import MAESettings, MaskedAutoencoder
from dpvip.models.wrn import ProjectionHead, WideResNet
from dpvip.randp.phase1 import FORMAT as PHASE1_FORMAT
from dpvip.randp.phase1 import load_backbone
from dpvip.train import checkpoint
from dpvip.transfer.features import RECIPES, crop_views, load_extractor, pool_patch_tokens

pytestmark = pytest.mark.usefixtures("torch_one_thread")

MAE_SIZE, MAE_WIDTH, MAE_DEPTH = 32, 64, 2  # "pico", patch 4: an 8 x 8 grid
WRN_SIZE, WRN_CHANNELS, HIDDEN = 12, 64, 32  # "wrn10_1" at 12 px: a 64-channel 3 x 3 map
WIDTHS = {
    ("mae", "prelogits"): MAE_WIDTH,
    ("mae", "blocks4"): MAE_DEPTH * 4 * MAE_WIDTH,
    ("wrn", "prelogits"): WRN_CHANNELS,
    ("wrn", "projection1"): HIDDEN,
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, str]:
    """A pico MAE and a Phase I wrn10_1 (trained at 12 px), with random weights."""
    folder = tmp_path_factory.mktemp("checkpoints")
    torch.manual_seed(0)
    save_mae(MaskedAutoencoder(MAESettings("pico", image_size=MAE_SIZE, patch_size=4)), folder / "mae.pt", {})
    head = ProjectionHead(WRN_CHANNELS * (WRN_SIZE // 4) ** 2, HIDDEN, 16)
    payload = {
        "format": PHASE1_FORMAT,
        "size": "wrn10_1",
        "model": WideResNet("wrn10_1").state_dict(),
        "head": head.state_dict(),
        "record": {"method": "align_uniform"},
    }
    checkpoint.save_atomic(payload, folder / "wrn.pt")
    return {"mae": str(folder / "mae.pt"), "wrn": str(folder / "wrn.pt")}


def images(size: int, n: int = 3, seed: int = 1) -> torch.Tensor:
    return torch.randn(n, 3, size, size, generator=torch.Generator().manual_seed(seed))


def size_of(kind: str) -> int:
    return MAE_SIZE if kind == "mae" else WRN_SIZE


@pytest.mark.parametrize(
    ("kind", "recipe"), [(kind, recipe) for kind, recipes in RECIPES.items() for recipe in recipes]
)
def test_every_recipe_gives_frozen_features_of_its_width(checkpoints, kind, recipe):
    extractor = load_extractor(kind, checkpoints[kind], recipe, size_of(kind))
    batch = images(size_of(kind))
    features = extractor(batch)
    assert extractor.width == WIDTHS[kind, recipe]
    assert features.shape == (3, extractor.width) and features.dtype == torch.float32
    assert not features.requires_grad and not extractor.network.training
    assert torch.allclose(extractor(batch[1:2]), features[1:2], atol=1e-5)  # per example


def test_mae_prelogits_is_the_normed_class_token(checkpoints):
    extractor = load_extractor("mae", checkpoints["mae"], "prelogits", MAE_SIZE)
    batch = images(MAE_SIZE)
    with torch.no_grad():
        expected = extractor.network.encode(batch)[:, 0]
    assert torch.allclose(extractor(batch), expected, atol=1e-5)


def test_patch_tokens_pool_to_a_two_by_two_grid():
    tokens = torch.arange(16.0).view(1, 16, 1)  # a 4 x 4 grid holding 0..15 in row-major order
    pooled = pool_patch_tokens(tokens, (4, 4))
    assert pooled.tolist() == [
        [(0 + 1 + 4 + 5) / 4, (2 + 3 + 6 + 7) / 4, (8 + 9 + 12 + 13) / 4, (10 + 11 + 14 + 15) / 4]
    ]
    two = torch.stack([torch.arange(16.0), -torch.arange(16.0)], dim=1).view(1, 16, 2)  # width 2: tokens stay whole
    assert pool_patch_tokens(two, (4, 4)).tolist() == [[2.5, -2.5, 4.5, -4.5, 10.5, -10.5, 12.5, -12.5]]


def test_blocks4_concatenates_every_blocks_pooled_patch_tokens(checkpoints):
    extractor = load_extractor("mae", checkpoints["mae"], "blocks4", MAE_SIZE)
    model, batch = extractor.network, images(MAE_SIZE)
    outputs = []
    handles = [block.register_forward_hook(lambda _m, _i, out: outputs.append(out)) for block in model.blocks]
    try:
        with torch.no_grad():
            model.encode(batch)  # unmasked: the same blocks on the same tokens
    finally:
        for handle in handles:
            handle.remove()
    features = extractor(batch).view(3, MAE_DEPTH, 4 * MAE_WIDTH)
    for position, out in enumerate(outputs):
        grid = out[:, 1:].reshape(3, 8, 8, MAE_WIDTH)  # the class token dropped, no final norm
        by_hand = grid.reshape(3, 2, 4, 2, 4, MAE_WIDTH).mean((2, 4)).flatten(1)
        assert torch.allclose(features[:, position], by_hand, atol=1e-5)


def test_wrn_recipes_match_the_backbone_and_head_by_hand(checkpoints):
    backbone, _ = load_backbone(checkpoints["wrn"], 1)
    head = checkpoint.load(checkpoints["wrn"])["head"]
    batch = images(WRN_SIZE)
    with torch.no_grad():
        backbone.eval()
        pooled = backbone.feature_map(batch).mean((2, 3))
        linear = F.linear(backbone.features(batch), head["layers.0.weight"], head["layers.0.bias"])
        projected = F.relu(F.group_norm(linear, 16, head["layers.1.weight"], head["layers.1.bias"]))
    assert torch.allclose(load_extractor("wrn", checkpoints["wrn"], "prelogits", WRN_SIZE)(batch), pooled, atol=1e-5)
    assert torch.allclose(
        load_extractor("wrn", checkpoints["wrn"], "projection1", WRN_SIZE)(batch), projected, atol=1e-5
    )


def test_wrn_prelogits_at_another_size_and_mae_at_a_larger_grid(checkpoints):
    assert load_extractor("wrn", checkpoints["wrn"], "prelogits", 16)(images(16)).shape == (3, WRN_CHANNELS)
    assert load_extractor("mae", checkpoints["mae"], "blocks4", 48)(images(48)).shape == (3, MAE_DEPTH * 4 * MAE_WIDTH)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("vit", "mae", "prelogits", 32), r"extractor kind 'vit' is not one of mae, wrn"),
        (("mae", "mae", "projection1", 32), r"mae feature recipe 'projection1' is not one of prelogits, blocks4"),
        (("wrn", "wrn", "blocks4", 12), r"wrn feature recipe 'blocks4' is not one of prelogits, projection1"),
        (("mae", "missing", "prelogits", 32), r"checkpoint .*missing\.pt does not exist"),
        (("wrn", "missing", "projection1", 12), r"checkpoint .*missing\.pt does not exist"),
        (
            ("wrn", "wrn", "projection1", 16),
            r"projection1 features of .*wrn\.pt need 12 px images \(the size Phase I trained on\), not 16",
        ),
        (("wrn", "mae", "prelogits", 12), r"mae\.pt is not a DP-RandP Phase I checkpoint"),
    ],
)
def test_bad_extractors_are_refused_in_one_line(checkpoints, tmp_path, args, message):
    kind, which, recipe, size = args
    path = checkpoints.get(which, str(tmp_path / "missing.pt"))
    with pytest.raises(DpvipInputError, match=message) as caught:
        load_extractor(kind, path, recipe, size)
    assert "\n" not in str(caught.value)


def test_images_of_another_size_are_refused(checkpoints):
    extractor = load_extractor("wrn", checkpoints["wrn"], "prelogits", WRN_SIZE)
    with pytest.raises(DpvipInputError, match=r"takes \(batch, 3, 12, 12\) images, not \(3, 3, 16, 16\)"):
        extractor(images(16))


def test_the_centre_crop_is_the_central_window():
    batch = images(20, n=2)
    crops = crop_views(batch, 12, "center", 0, torch.arange(2), 0)
    assert torch.equal(crops, batch[..., 4:16, 4:16])
    assert torch.equal(crop_views(batch, 12, "center", 3, torch.arange(5, 7), 9), crops)  # view, indices, seed unused


def test_an_inception_view_of_an_example_does_not_depend_on_its_batch():
    batch, indices = images(20, n=5), torch.tensor([7, 3, 11, 0, 5])
    together = crop_views(batch, 12, "inception", 1, indices, seed=4)
    alone = torch.cat([crop_views(batch[k : k + 1], 12, "inception", 1, indices[k : k + 1], seed=4) for k in range(5)])
    assert together.shape == (5, 3, 12, 12)
    assert torch.equal(together, alone)
    other_view = crop_views(batch, 12, "inception", 2, indices, seed=4)
    other_seed = crop_views(batch, 12, "inception", 1, indices, seed=5)
    assert all(
        not torch.equal(together[k], other_view[k]) and not torch.equal(together[k], other_seed[k]) for k in range(5)
    )


def test_inception_crops_flip_about_half_the_time():
    """A left-right ramp keeps its direction under any crop unless it is flipped."""
    ramp = torch.linspace(-1, 1, 20).expand(64, 3, 20, 20)
    crops = crop_views(ramp, 8, "inception", 0, torch.arange(64), seed=0)
    flipped = (crops[..., 0] > crops[..., -1]).all(dim=(1, 2))
    assert 16 < int(flipped.sum()) < 48


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((12, "random", 0, 2), r"crop 'random' is not one of center, inception"),
        ((24, "center", 0, 2), r"images of \(20, 20\) px are smaller than the 24 px centre crop"),
        ((12, "inception", 0, 3), r"crop_views got 3 indices for 2 images"),
        ((12, "inception", -1, 2), r"view -1 and seed 0 must be non-negative"),
    ],
)
def test_bad_crops_are_refused(args, message):
    size, crop, view, n_indices = args
    with pytest.raises(DpvipInputError, match=message):
        crop_views(images(20, n=2), size, crop, view, torch.arange(n_indices), 0)
