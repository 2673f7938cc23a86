"""Semantic segmentation: mIoU by hand, UPerNet's output shape and taps, layer-wise lr decay,
training on the shapes stand-in and on an easy task, the ADE20K reader, bad settings."""

import re
from dataclasses import replace

import numpy as np
import pytest
import torch
from PIL import Image

from dpvip.errors import DpvipInputError
from dpvip.evaluate.coco_standin import CocoStandIn
from dpvip.evaluate.segmentation import (
    SegmentationSettings,
    _optimizer,
    evaluate_ade,
    mean_iou,
    train_segmenter,
    trivial_scores,
)
from dpvip.evaluate.segmentation_data import IGNORE_INDEX, SegmentationSet, ade20k, shapes_segmentation
from dpvip.evaluate.upernet import Segmenter, tap_blocks
from dpvip.models.mae import encoder_at
from dpvip.models import MAESettings
from dpvip.models.mae import MaskedAutoencoder

pytestmark = pytest.mark.usefixtures("torch_one_thread")

QUICK = SegmentationSettings(epochs=4, batch_size=8, lr=2e-3, warmup_epochs=0.5, channels=16, aux_channels=8)


def mae(size: str = "pico", image_size: int = 32) -> MaskedAutoencoder:
    torch.manual_seed(0)
    return MaskedAutoencoder(MAESettings(size, image_size=image_size, patch_size=4))


# --- scores --------------------------------------------------------------------------------
def test_mean_iou_by_hand_with_ignored_pixels_and_an_absent_class():
    truth = torch.tensor([[[0, 0, 1, 1], [2, IGNORE_INDEX, 1, 0]]])
    predicted = torch.tensor([[[0, 1, 1, 1], [2, 2, 0, 0]]])  # the 2 on the ignored pixel must not count
    scores = mean_iou(predicted, truth, classes=4)
    # class 0: 2 hits, 1 missed, 1 false -> 2/4; class 1 likewise; class 2: 1/1; class 3 nowhere.
    assert scores["per_class"] == pytest.approx([50.0, 50.0, 100.0, None])
    assert scores["miou"] == pytest.approx(200 / 3)
    assert scores["pixel_accuracy"] == pytest.approx(100 * 5 / 7)


def test_a_perfect_prediction_scores_100():
    truth = torch.randint(0, 3, (2, 8, 8), generator=torch.Generator().manual_seed(0))
    assert mean_iou(truth.clone(), truth, classes=5)["miou"] == pytest.approx(100.0)


def test_a_label_outside_the_classes_is_refused():
    with pytest.raises(DpvipInputError, match="class 7"):
        mean_iou(torch.zeros(1, 2, 2, dtype=torch.long), torch.full((1, 2, 2), 7), classes=4)


# --- the network ---------------------------------------------------------------------------
def test_taps_follow_the_depth():
    assert tap_blocks(12) == (4, 6, 8, 12) and tap_blocks(24) == (8, 12, 16, 24)
    assert tap_blocks(4) == (1, 2, 3, 4) and tap_blocks(2) == (1, 1, 1, 2)


@pytest.mark.parametrize("size, depth", [("micro", 4), ("pico", 2)])
def test_the_output_has_the_input_size_for_a_micro_and_a_depth_2_encoder(size, depth):
    encoder = encoder_at(mae(size, image_size=32), 64)  # pre-trained at 32 px, segmenting at 64
    model = Segmenter(encoder, classes=5, channels=16, aux_channels=8).eval()
    assert len(encoder.blocks) == depth
    with torch.no_grad():
        assert model(torch.randn(2, 3, 64, 64)).shape == (2, 5, 64, 64)
    main, aux = model.train().logits(torch.randn(2, 3, 64, 64))
    assert main.shape == aux.shape == (2, 5, 64, 64)


def test_the_rebuilt_encoder_keeps_the_weights():
    original = mae()
    rebuilt = encoder_at(original, 64)
    assert rebuilt.settings.image_size == 64 and rebuilt.pos_embed.shape[1] == 1 + 16 * 16
    assert all(torch.equal(v, rebuilt.state_dict()[k]) for k, v in original.state_dict().items())


def test_layer_decay_scales_the_lr_down_towards_the_input():
    model = Segmenter(mae(), classes=3, channels=16)
    scale = {id(p): group["lr_scale"] for group in _optimizer(model, QUICK).param_groups for p in group["params"]}
    params = dict(model.named_parameters())
    decay = QUICK.layer_decay
    assert scale[id(params["head.classify.1.weight"])] == 1.0
    assert scale[id(params["mae.blocks.1.attn.qkv.weight"])] == pytest.approx(decay)
    assert scale[id(params["mae.blocks.0.attn.qkv.weight"])] == pytest.approx(decay**2)
    assert scale[id(params["mae.patch_embed.proj.weight"])] == pytest.approx(decay**3)
    assert id(params["mae.decoder_pred.weight"]) not in scale  # the decoder is not trained


# --- training ------------------------------------------------------------------------------
def bright_boxes(count: int, seed: int) -> SegmentationSet:
    """Class 1 is a bright box on a dark, noisy background: learnable in seconds."""
    generator = torch.Generator().manual_seed(seed)
    masks = torch.zeros(count, 32, 32, dtype=torch.long)
    for mask in masks:
        top, left = torch.randint(0, 16, (2,), generator=generator).tolist()
        mask[top : top + 16, left : left + 16] = 1
    images = (2 * masks.float() - 1).unsqueeze(1) + 0.3 * torch.randn(count, 3, 32, 32, generator=generator)
    return SegmentationSet(images, masks, 2, "bright-boxes")


def test_training_learns_an_easy_task_and_leaves_the_given_model_alone():
    model = mae()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = evaluate_ade(model, bright_boxes(32, seed=1), bright_boxes(16, seed=2), QUICK, progress=False)
    background_only = mean_iou(torch.zeros(16, 32, 32, dtype=torch.long), bright_boxes(16, seed=2).masks, 2)["miou"]
    assert result["miou"] > background_only + 20
    assert result["train_images"] == 32 and result["test_images"] == 16 and result["taps"] == [1, 1, 1, 2]
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_training_on_the_shapes_stand_in_lowers_the_loss():
    spec = CocoStandIn(images=16, image_size=32)
    data = shapes_segmentation(spec, "train")
    segmenter = train_segmenter(mae(), data, replace(QUICK, epochs=3), progress=False)
    losses = segmenter.epoch_losses
    assert len(losses) == 3 and all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_shapes_masks_label_every_visible_shape_pixel():
    spec = CocoStandIn(images=4, image_size=32, min_area=16)
    data = shapes_segmentation(spec, "val")
    assert data.images.shape == (4, 3, 32, 32) and data.masks.shape == (4, 32, 32) and data.classes == 4
    assert data.masks.dtype == torch.int64 and set(data.masks.unique().tolist()) <= {0, 1, 2, 3}
    assert (data.masks > 0).any()


# --- ADE20K --------------------------------------------------------------------------------
def write_ade(root, split: str = "training") -> None:
    (root / "images" / split).mkdir(parents=True)
    (root / "annotations" / split).mkdir(parents=True)
    square = np.zeros((32, 32), dtype=np.uint8)  # top half "other" (0)
    square[16:, :16], square[16:, 16:] = 1, 150
    wide = np.full((32, 48), 5, dtype=np.uint8)
    wide[:, :8] = 0  # outside the centre crop once resized
    for name, labels in (("ADE_a", square), ("ADE_b", wide)):
        Image.fromarray(np.full((*labels.shape, 3), 128, dtype=np.uint8)).save(root / "images" / split / f"{name}.jpg")
        Image.fromarray(labels).save(root / "annotations" / split / f"{name}.png")


def test_ade20k_shifts_labels_ignores_other_and_centre_crops(tmp_path):
    write_ade(tmp_path)
    data = ade20k(tmp_path, "training", image_size=16)
    assert data.images.shape == (2, 3, 16, 16) and data.masks.shape == (2, 16, 16) and data.classes == 150
    square, wide = data.masks
    assert (square[:8] == IGNORE_INDEX).all() and (square[8:, :8] == 0).all() and (square[8:, 8:] == 149).all()
    assert (wide == 4).all()


def test_ade20k_names_a_missing_folder_or_annotation(tmp_path):
    with pytest.raises(DpvipInputError, match=re.escape(str(tmp_path / "images" / "validation"))):
        ade20k(tmp_path, "validation", 16)
    write_ade(tmp_path)
    (tmp_path / "annotations" / "training" / "ADE_b.png").unlink()
    with pytest.raises(DpvipInputError, match="ADE_b.png"):
        ade20k(tmp_path, "training", 16)


# --- settings ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "field, value",
    [
        ("epochs", 0),
        ("batch_size", 0),
        ("lr", 0.0),
        ("layer_decay", 1.5),
        ("warmup_epochs", -1.0),
        ("channels", 0),
        ("aux_weight", -0.1),
    ],
)
def test_bad_settings_are_refused_naming_the_field(field, value):
    with pytest.raises(DpvipInputError, match=field):
        train_segmenter(mae(), bright_boxes(2, seed=0), replace(QUICK, **{field: value}), progress=False)


def test_the_trivial_segmenter_paints_the_training_splits_most_frequent_class_everywhere():
    """Training pixels: class 2 most often (ignored pixels not counted); on the test masks
    every pixel 2 scores IoU 4/8 for class 2 and 0 for the other classes present."""
    train_masks = torch.tensor([[[2, 2, 2], [1, IGNORE_INDEX, IGNORE_INDEX]]])
    train_masks = torch.cat([train_masks, torch.full((1, 2, 3), IGNORE_INDEX)])
    test_masks = torch.tensor([[[2, 2, 0, 0], [2, 2, 1, 1]], [[0, 0, 0, 0], [0, 0, 0, 0]]])
    train = SegmentationSet(torch.zeros(2, 3, 2, 3), train_masks, 3, "train")
    test = SegmentationSet(torch.zeros(2, 3, 2, 4), test_masks, 3, "test")
    scores = trivial_scores(train, test)
    assert scores["class"] == 2
    assert scores["miou"] == pytest.approx(100 * (0 + 0 + 4 / 16) / 3)
    assert scores["pixel_accuracy"] == pytest.approx(100 * 4 / 16)
