"""The generated COCO-format stand-in: pycocotools reads it, its ground truth scored as
detections gives AP 1 for boxes and masks, masks are the visible pixels, images repeat for
a seed."""

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
from dpvip.evaluate.coco_standin import CATEGORIES, CocoStandIn, render, write_split

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
