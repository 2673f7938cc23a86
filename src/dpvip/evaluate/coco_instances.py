"""COCO-format instance data and its scoring: the set as torchvision's detection models take
it (`CocoInstances`), detections in COCO's result format (`coco_results`) and their box and
mask AP by pycocotools' COCOeval (`coco_scores`), and the trivial detector's AP beside them
(`whole_image_scores`). Used by the ViTDet evaluation (`detection`).
"""

from __future__ import annotations

import contextlib
import copy
import io
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from dpvip.errors import DpvipInputError

KINDS = (("bbox", "box"), ("segm", "mask"))  # COCOeval's iouType and our key's suffix
NO_DETECTIONS = "no detections: AP set to 0 (pycocotools cannot score an empty result list)"


def _quiet_coco(annotation_file: str | Path):
    from pycocotools.coco import COCO

    if not Path(annotation_file).is_file():
        raise DpvipInputError(f"COCO annotation file {annotation_file} does not exist")
    with contextlib.redirect_stdout(io.StringIO()):  # COCO() prints its loading times
        return COCO(str(annotation_file))


class CocoInstances(torch.utils.data.Dataset):
    """A COCO-format instance set as torchvision's detection models take it: an RGB image in
    [0, 1] (the model normalises) and {"boxes" (n, 4) xyxy, "labels" 1..K, "masks" (n, H, W)
    uint8, "image_id"}. Labels number the annotation file's categories in id order."""

    def __init__(self, annotation_file: str | Path, image_root: str | Path):
        self.coco = _quiet_coco(annotation_file)
        self.root = Path(image_root)
        self.image_ids = sorted(self.coco.getImgIds())
        self.category_ids = sorted(self.coco.getCatIds())
        self.label_of = {category: label for label, category in enumerate(self.category_ids, start=1)}

    def __len__(self) -> int:
        return len(self.image_ids)

    def annotations(self, image_id: int) -> list[dict]:
        """Annotations used for training: no crowd regions, no boxes under 1 px."""
        found = self.coco.loadAnns(self.coco.getAnnIds(imgIds=[image_id], iscrowd=False))
        return [a for a in found if a["bbox"][2] >= 1 and a["bbox"][3] >= 1]

    def instances(self) -> int:
        return sum(len(self.annotations(image_id)) for image_id in self.image_ids)

    def image(self, index: int) -> torch.Tensor:
        info = self.coco.loadImgs(self.image_ids[index])[0]
        path = self.root / info["file_name"]
        if not path.is_file():
            raise DpvipInputError(f"COCO image {path} does not exist")
        with Image.open(path) as image:
            pixels = np.array(image.convert("RGB"))  # a writable copy for torch
        return torch.from_numpy(pixels).permute(2, 0, 1).float() / 255

    def __getitem__(self, index: int) -> tuple[torch.Tensor, dict]:
        image = self.image(index)
        image_id = self.image_ids[index]
        found = self.annotations(image_id)
        boxes = torch.tensor(
            [[x, y, x + w, y + h] for x, y, w, h in (a["bbox"] for a in found)], dtype=torch.float32
        ).reshape(-1, 4)
        labels = torch.tensor([self.label_of[a["category_id"]] for a in found], dtype=torch.int64)
        height, width = image.shape[-2:]
        masks = (
            np.stack([self.coco.annToMask(a) for a in found]) if found else np.zeros((0, height, width), dtype=np.uint8)
        )
        return image, {"boxes": boxes, "labels": labels, "masks": torch.from_numpy(masks), "image_id": image_id}


def coco_results(image_id: int, output: dict, category_ids: list[int]) -> list[dict]:
    """One image's detections in COCO's result format, masks binarised at 0.5 as RLE."""
    from pycocotools import mask as mask_utils

    if len(output["boxes"]) == 0:
        return []
    boxes = output["boxes"].tolist()
    masks = (output["masks"][:, 0] > 0.5).numpy().astype(np.uint8)
    rles = mask_utils.encode(np.asfortranarray(masks.transpose(1, 2, 0)))
    results = []
    for (x0, y0, x1, y1), label, score, rle in zip(boxes, output["labels"].tolist(), output["scores"].tolist(), rles):
        rle["counts"] = rle["counts"].decode("ascii")
        results.append(
            {
                "image_id": image_id,
                "category_id": category_ids[label - 1],
                "bbox": [x0, y0, x1 - x0, y1 - y0],
                "segmentation": rle,
                "score": score,
            }
        )
    return results


def _coco_stats(coco, results: list[dict], kind: str) -> np.ndarray:
    from pycocotools.cocoeval import COCOeval

    results = copy.deepcopy(results)  # loadRes writes ids and areas into the dicts
    if kind == "segm":
        for result in results:  # without the box, pycocotools sizes a mask by its own area
            result.pop("bbox")
    with contextlib.redirect_stdout(io.StringIO()):
        evaluation = COCOeval(coco, coco.loadRes(results), kind)
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return evaluation.stats


def coco_scores(data: CocoInstances, results: list[dict], instances: int) -> dict:
    """Box and mask AP (COCOeval, percent) of `results` on `data`, with the counts."""
    record = {"val_images": len(data), "val_instances": instances, "detections": len(results)}
    for kind, suffix in KINDS:
        stats = _coco_stats(data.coco, results, kind) if results else np.zeros(3)
        record |= {
            f"ap_{suffix}": 100 * float(stats[0]),
            f"ap50_{suffix}": 100 * float(stats[1]),
            f"ap75_{suffix}": 100 * float(stats[2]),
        }
    return record | ({} if results else {"note": NO_DETECTIONS})


WHOLE_IMAGE = "every box and mask the whole image, once per category and image (score 1)"


def whole_image_scores(annotation_file: str | Path) -> dict:
    """The trivial detector's AP (points) on a COCO-format set: `WHOLE_IMAGE`. It knows
    nothing of the images, so a detector that learnt something scores above it; it is not
    zero where objects fill much of their image (the stand-in's do)."""
    from pycocotools import mask as mask_utils

    coco = _quiet_coco(annotation_file)
    results = []
    for image in coco.loadImgs(sorted(coco.getImgIds())):
        height, width = image["height"], image["width"]
        whole = mask_utils.encode(np.ones((height, width), dtype=np.uint8, order="F"))
        for category in sorted(coco.getCatIds()):
            results.append(
                {
                    "image_id": image["id"],
                    "category_id": category,
                    "bbox": [0.0, 0.0, float(width), float(height)],
                    "segmentation": whole,
                    "score": 1.0,
                }
            )
    return {f"ap_{suffix}": 100 * float(_coco_stats(coco, results, kind)[0]) for kind, suffix in KINDS}
