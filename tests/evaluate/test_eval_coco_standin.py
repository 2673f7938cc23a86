"""The generated COCO-format stand-in: pycocotools reads it, its ground truth scored as
detections gives AP 1 for boxes and masks, masks are the visible pixels, each category in its
own hues and shapes large enough to span patches, images repeat for a seed; the trivial
detector (every box the whole image) scores 100 where objects fill their images, and next to
nothing on the stand-in."""

import contextlib
import io
import json

import numpy as np
import pytest
from PIL import Image
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from dpvip.errors import DpvipInputError
import colorsys

from dpvip.evaluate.coco_instances import whole_image_scores
from dpvip.evaluate.coco_standin import CATEGORIES, HUE_SPREAD, RADIUS, CocoStandIn, render, write_split

SPEC = CocoStandIn(images=12, image_size=64, seed=3)


@pytest.fixture(scope="module")
def val_json(tmp_path_factory):
    return write_split(SPEC, "val", tmp_path_factory.mktemp("coco"))


def quiet_coco(path) -> COCO:
    with contextlib.redirect_stdout(io.StringIO()):
        return COCO(str(path))


def test_pycocotools_reads_every_image_and_instance(val_json):
    coco = quiet_coco(val_json)
    assert len(coco.getImgIds()) == 12 and [c["name"] for c in coco.loadCats(coco.getCatIds())] == list(CATEGORIES)
    annotations = coco.loadAnns(coco.getAnnIds())
    assert len(annotations) >= 12 and all(a["area"] >= SPEC.min_area for a in annotations)
    for image in coco.loadImgs(coco.getImgIds()):
        assert Image.open(val_json.parent / image["file_name"]).size == (64, 64)


@pytest.mark.parametrize("kind", ["bbox", "segm"])
def test_ground_truth_as_detections_scores_ap_one(val_json, kind):
    coco = quiet_coco(val_json)
    detections = [
        {k: a[k] for k in ("image_id", "category_id", "bbox", "segmentation")} | {"score": 1.0}
        for a in coco.loadAnns(coco.getAnnIds())
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        evaluation = COCOeval(coco, coco.loadRes(detections), kind)
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    assert evaluation.stats[0] == pytest.approx(1.0)


def test_masks_are_the_visible_pixels_and_the_boxes_fit_them(val_json):
    record = json.loads(val_json.read_text())
    image_id = record["images"][0]["id"]
    _, shapes = render(SPEC, "val", image_id)
    stored = [a for a in record["annotations"] if a["image_id"] == image_id]
    assert len(stored) == len(shapes)
    union = np.zeros((64, 64), dtype=int)
    for annotation, (category, mask) in zip(stored, shapes):
        decoded = mask_utils.decode(annotation["segmentation"]).astype(bool)
        assert annotation["category_id"] == category and np.array_equal(decoded, mask)
        ys, xs = np.nonzero(mask)
        assert annotation["bbox"] == [xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1]
        union += mask
    assert union.max() <= 1  # occlusion: no pixel belongs to two instances


def test_a_seed_repeats_images_and_another_changes_them():
    first, second = render(SPEC, "train", 5), render(SPEC, "train", 5)
    assert np.array_equal(first[0], second[0])
    assert not np.array_equal(first[0], render(CocoStandIn(images=12, seed=4), "train", 5)[0])
    assert not np.array_equal(first[0], render(SPEC, "val", 5)[0])


def test_bad_settings_are_refused(tmp_path):
    with pytest.raises(DpvipInputError, match="split 'test' is not one of train, val"):
        write_split(SPEC, "test", tmp_path)
    with pytest.raises(DpvipInputError, match="COCO stand-in needs"):
        write_split(CocoStandIn(images=0), "train", tmp_path)


def test_each_category_is_drawn_in_its_own_band_of_hues_at_a_size_that_spans_patches():
    hues = {category: [] for category in range(1, len(CATEGORIES) + 1)}
    for image_id in range(1, 41):
        image, shapes = render(SPEC, "train", image_id)
        for category, mask in shapes:
            red, green, blue = image[mask][0] / 255.0  # a shape is one flat colour
            hue, saturation, value = colorsys.rgb_to_hsv(red, green, blue)
            hues[category].append(hue)
            assert saturation >= 0.59 and value >= 0.59
    for category, found in hues.items():
        centre = (category - 1) / len(CATEGORIES)
        distance = [min(abs(h - centre), 1 - abs(h - centre)) for h in found]
        assert len(found) >= 10 and max(distance) <= HUE_SPREAD + 0.01, (CATEGORIES[category - 1], max(distance))
    # the whole shape before occlusion: at least RADIUS[0] of the side from its centre
    largest = max(mask.sum() for image_id in range(1, 41) for _, mask in render(SPEC, "val", image_id)[1])
    assert largest >= (RADIUS[0] * 64) ** 2 * 2


def test_the_trivial_detector_scores_100_on_objects_that_fill_their_image_and_little_here(tmp_path, val_json):
    record = {
        "images": [{"id": 1, "file_name": "a.png", "width": 8, "height": 6}],
        "annotations": [
            {
                "id": 1,
                "image_id": 1,
                "category_id": 1,
                "segmentation": {"size": [6, 8], "counts": "0`1"},  # RLE of all 48 pixels
                "area": 48.0,
                "bbox": [0, 0, 8, 6],
                "iscrowd": 0,
            }
        ],
        "categories": [{"id": 1, "name": "circle"}, {"id": 2, "name": "square"}],
    }
    whole = tmp_path / "whole.json"
    whole.write_text(json.dumps(record))
    assert whole_image_scores(whole) == {"ap_box": pytest.approx(100.0), "ap_mask": pytest.approx(100.0)}
    standin = whole_image_scores(val_json)
    assert standin["ap_box"] < 1.0 and standin["ap_mask"] < 1.0
