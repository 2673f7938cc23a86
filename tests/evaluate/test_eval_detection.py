"""ViTDet on an MAE encoder: the simple feature pyramid's levels, training and COCO scoring
on the generated stand-in, the schedule, the lr decay by layer, refused settings."""

import dataclasses

import pytest
import torch

from dpvip.errors import DpvipInputError
from dpvip.evaluate.detection import (
    PAPER,
    CocoInstances,
    _flipped,
    DetectionSettings,
    _optimizer,
    evaluate_coco,
    lr_factor,
    score_detector,
    train_detector,
)
from dpvip.evaluate.vitdet import PlainViT, SimpleFeaturePyramid, build_vitdet
from dpvip.models import MAESettings
from dpvip.models.mae import MaskedAutoencoder
from dense_tasks import QUICK, micro_mae, write_coco

pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    return write_coco(tmp_path_factory.mktemp("coco"), train_images=8)


def test_the_pyramid_has_four_levels_and_pool_at_the_vitdet_strides():
    pyramid = SimpleFeaturePyramid(PlainViT(micro_mae(), 64), channels=24)
    levels = pyramid(torch.zeros(2, 3, 64, 64))
    assert list(levels) == ["p0", "p1", "p2", "p3", "pool"]  # strides p/4, p/2, p, 2p and 4p for p = 4
    assert pyramid.strides == {"p0": 1, "p1": 2, "p2": 4, "p3": 8, "pool": 16}
    for name, feature in levels.items():
        assert feature.shape == (2, 24, 64 // pyramid.strides[name], 64 // pyramid.strides[name])
    assert pyramid.out_channels == 24
    assert not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in pyramid.modules())


def test_the_backbone_is_the_plain_encoder_without_decoder_class_token_or_final_norm():
    mae = micro_mae(image_size=32)  # pre-trained at 32 px, detecting at 64 px: every weight carries over
    net = PlainViT(mae, 64, drop_path=0.3)
    assert isinstance(net.blocks[0].drop_path1, torch.nn.Identity) and net.blocks[
        -1
    ].drop_path2.drop_prob == pytest.approx(0.3)
    names = set(net.state_dict())
    assert "blocks.0.attn.qkv.weight" in names and "patch_embed.proj.weight" in names
    assert not any(name.startswith(("decoder", "mask_token", "cls_token", "norm.")) for name in names)
    assert torch.equal(net.blocks[0].attn.qkv.weight, mae.blocks[0].attn.qkv.weight)
    assert net(torch.zeros(1, 3, 48, 64)).shape == (1, 96, 16, 16)  # padded to the square input
    with pytest.raises(ValueError, match="does not fit"):
        net(torch.zeros(1, 3, 80, 64))


def test_the_images_are_normalised_once_and_not_resized():
    model = build_vitdet(micro_mae(), classes=3, image_size=64, channels=16)
    transform = model.transform
    assert transform.min_size == (64,) and transform.max_size == 64
    assert transform.image_mean == pytest.approx([0.485, 0.456, 0.406]) and transform.image_std == pytest.approx(
        [0.229, 0.224, 0.225]
    )
    batch, _ = transform([torch.rand(3, 64, 64), torch.rand(3, 40, 64)])
    assert batch.tensors.shape == (2, 3, 64, 64)


def test_the_reader_gives_boxes_labels_and_masks_of_each_image(coco):
    root, train_json, _ = coco
    data = CocoInstances(train_json, root)
    image, target = data[0]
    assert image.shape == (3, 64, 64) and 0 <= image.min() and image.max() <= 1
    assert target["boxes"].shape[1] == 4 and len(target["boxes"]) == len(target["labels"]) == len(target["masks"]) >= 1
    assert set(target["labels"].tolist()) <= {1, 2, 3}
    flipped_image, flipped = _flipped(image, target)
    assert torch.equal(flipped_image.flip(-1), image)
    for boxes, masks in ((target["boxes"], target["masks"]), (flipped["boxes"], flipped["masks"])):
        for box, mask in zip(boxes, masks):  # a box is the tight frame of its mask (COCO's xywh -> xyxy)
            ys, xs = torch.nonzero(mask, as_tuple=True)
            assert box.tolist() == [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]


def test_training_runs_and_scoring_gives_finite_box_and_mask_ap(coco):
    root, train_json, val_json = coco
    mae = micro_mae()
    before = {k: v.clone() for k, v in mae.state_dict().items()}
    model = train_detector(mae, train_json, root, QUICK, progress=False)
    losses = model.training_record["losses"]
    assert len(losses) == QUICK.iterations and all(torch.isfinite(torch.tensor(losses)))
    assert model.training_record["train_images"] == 8 and model.category_ids == [1, 2, 3]
    assert all(torch.equal(before[k], v) for k, v in mae.state_dict().items())  # the given model is left alone
    scores = score_detector(model, val_json, root)
    assert scores["detections"] > 0 and scores["val_images"] == 4
    # COCOeval's -1 means "nothing to score"; AP averaged over IoU 0.5:0.95 cannot exceed AP at 0.5
    for kind in ("box", "mask"):
        assert 0.0 <= scores[f"ap_{kind}"] <= scores[f"ap50_{kind}"]


def test_no_detections_score_zero_and_say_so(coco):
    root, train_json, val_json = coco
    model = build_vitdet(micro_mae(), classes=3, image_size=64, channels=16, head_convs=0)
    model.roi_heads.score_thresh = 1.1  # nothing passes
    scores = score_detector(model, val_json, root)
    assert (
        scores["detections"] == 0 and scores["ap_box"] == scores["ap_mask"] == 0.0 and "no detections" in scores["note"]
    )


def test_evaluate_coco_records_the_settings_and_counts(coco):
    root, train_json, val_json = coco
    record = evaluate_coco(
        micro_mae(), train_json, root, val_json, root, dataclasses.replace(QUICK, iterations=2), progress=False
    )
    assert record["settings"]["iterations"] == 2 and record["encoder"]["size"] == "micro"
    assert record["train_images"] == 8 and record["val_images"] == 4 and record["categories"] == 3
    assert record["val_instances"] >= 4
    for kind in ("box", "mask"):  # COCOeval's averages: AP over IoU 0.5:0.95 is at most AP at 0.5
        assert 0.0 <= record[f"ap_{kind}"] <= record[f"ap50_{kind}"], record


def test_the_schedule_warms_up_from_a_thousandth_then_steps_down_tenfold():
    settings = DetectionSettings(iterations=1000, warmup_iterations=100, lr_steps=(0.5, 0.9))
    assert lr_factor(0, settings) == pytest.approx(0.001)
    assert lr_factor(50, settings) == pytest.approx(0.5005)
    assert lr_factor(100, settings) == lr_factor(499, settings) == 1.0
    assert lr_factor(500, settings) == pytest.approx(0.1) and lr_factor(900, settings) == pytest.approx(0.01)
    assert (
        PAPER.iterations == 184_375
        and round(PAPER.lr_steps[0] * PAPER.iterations) == 163_889
        and round(PAPER.lr_steps[1] * PAPER.iterations) == 177_546
    )


def test_the_lr_decays_by_layer_from_the_heads_down_to_the_patch_embedding():
    settings = dataclasses.replace(QUICK, layer_decay=0.5)
    model = build_vitdet(micro_mae(), classes=3, image_size=64, channels=16)
    lr_of = {id(p): group["lr"] for group in _optimizer(model, settings).param_groups for p in group["params"]}
    named = dict(model.named_parameters())
    depth = 4
    assert lr_of[id(named["roi_heads.box_predictor.cls_score.weight"])] == pytest.approx(1e-3)
    assert lr_of[id(named["backbone.levels.p2.0.weight"])] == pytest.approx(1e-3)
    assert lr_of[id(named[f"backbone.net.blocks.{depth - 1}.attn.qkv.weight"])] == pytest.approx(1e-3 * 0.5)
    assert lr_of[id(named["backbone.net.blocks.0.attn.qkv.weight"])] == pytest.approx(1e-3 * 0.5**depth)
    assert lr_of[id(named["backbone.net.patch_embed.proj.weight"])] == pytest.approx(1e-3 * 0.5 ** (depth + 1))


@pytest.mark.parametrize(
    "field, value",
    [
        ("iterations", 0),
        ("batch_size", 0),
        ("lr", 0.0),
        ("weight_decay", -0.1),
        ("layer_decay", 1.5),
        ("drop_path", 1.0),
        ("lr_steps", (0.9, 0.5)),
        ("head_convs", -1),
        ("image_size", 0),
        ("score_threshold", 1.0),
    ],
)
def test_bad_settings_are_refused_naming_the_field(field, value):
    with pytest.raises(DpvipInputError, match=field):
        dataclasses.replace(QUICK, **{field: value}).check()


def test_a_patch_size_the_pyramid_cannot_split_is_refused():
    torch.manual_seed(0)
    mae = MaskedAutoencoder(MAESettings("pico", image_size=36, patch_size=6))
    with pytest.raises(DpvipInputError, match="patch size"):
        build_vitdet(mae, classes=3, image_size=36, channels=16)


def test_a_perfect_detector_reads_100_points_in_table4(coco):
    """AP is in points from coco_scores on, and nothing converts it again: the ground truth
    fed back as predictions reads 100 in Table 4, not 10,000 (it did, AP x 100 twice)."""
    from pathlib import Path

    from dpvip.evaluate.coco_instances import coco_scores
    from dpvip.plan.vip_rows import Row
    from dpvip.report.common.paper_values import load_paper_values
    from dpvip.report.vip.tables import ours_by_backbone, vip_table

    root, _, val_json = coco
    data = CocoInstances(val_json, root)
    truth = data.coco.loadAnns(data.coco.getAnnIds(iscrowd=False))
    predictions = [
        {
            "image_id": a["image_id"],
            "category_id": a["category_id"],
            "bbox": a["bbox"],
            "segmentation": data.coco.annToRLE(a),
            "score": 1.0,
        }
        for a in truth
    ]
    scores = coco_scores(data, predictions, len(truth))
    assert scores["ap_box"] == pytest.approx(100.0) and scores["ap_mask"] == pytest.approx(100.0)
    result = {  # the job's result (dpvip.evaluate.jobs), as Table 4 reads it
        "evaluation": {"task": "coco", "backbone": "vip_micro", "dataset": None},
        "columns": {"COCO AP box": scores["ap_box"], "COCO AP mask": scores["ap_mask"]},
    }
    values = load_paper_values(Path(__file__).resolve().parents[2] / "config" / "paper_values")
    row = Row("ViP-micro", {c: ("vip_micro", c) for c in ("COCO AP box", "COCO AP mask")}, "vip_micro")
    table = vip_table("vip_table4", values, [row], ours_by_backbone([result])).set_index("model")
    assert table.at["ViP-micro", "COCO AP box (ours)"] == pytest.approx(100.0)
    assert table.at["ViP-micro", "COCO AP mask (ours)"] == pytest.approx(100.0)
