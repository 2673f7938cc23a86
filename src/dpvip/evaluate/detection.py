"""COCO object detection and instance segmentation of MAE encoders: ViP Table 4, "COCO AP".

ViP fine-tunes ViTDet-B (Li et al. 2022, detectron2's `mask_rcnn_vitdet_b_100ep` config) on
COCO 2017 train from the pre-trained encoder and reports box and mask AP on val2017. That
config, the `PAPER` settings here: AdamW (lr 1e-4, betas 0.9/0.999, weight decay 0.1, none
on norms), layer-wise lr decay 0.7, drop path 0.1, batch 64, 184,375 iterations (100
epochs), 1024 px inputs with large-scale jitter, linear warm-up over 250 iterations from
0.001x, then x0.1 at iterations 163,889 and 177,546 (88.9% and 96.3%).

This module trains the torchvision rendition of ViTDet (see `vitdet`) at CPU scale, on COCO-
format data (the generated stand-in or a COCO subset), and scores it with pycocotools'
COCOeval. Choices of ours: augmentation is a horizontal flip only (no large-scale jitter);
every image is resized so its longer side is `image_size` (ViTDet's test-time resize) and
padded square; no weight decay on biases either (timm's rule, as the other fine-tuning
here); crowd annotations and boxes under 1 px are left out of training, as detectron2 does.

Each step's global batch is cut into micro-batches of `micro_batch` images, one forward and
backward each, spread over the processes (see `dense_training`); a micro-batch's losses
are torchvision's (means over its images' sampled anchors, RoIs and masks), weighted by its
share of the batch. detectron2 normalises each GPU's losses over that GPU's images in the
same way, so `micro_batch` plays the part of its images per GPU; 1, the default, also keeps
a 1024 px ViT-B with global attention within one GPU's memory. The data order, the flips
and the model's randomness are functions of (seed, step, micro-batch), so a run killed and
resumed from its saved state (every `checkpoint_every` steps and on SIGTERM) ends with the
weights of an uninterrupted one, and the number of processes changes the result only by
float rounding.
At CPU scale the heads can be made lighter (`pyramid_channels`, `head_convs`,
`rois_per_image`, `proposals_per_image`) and `score_threshold` lowered to 0, so that a
barely trained detector still hands COCOeval its 100 best guesses an image.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch
from timm.optim import param_groups_layer_decay
from tqdm import tqdm

from dpvip.errors import DpvipInputError
from dpvip.evaluate.dense_training import (
    MODEL,
    MicroBatch,
    accumulate_gradients,
    augmentation_generator,
    broadcast_from_main,
    check_no_batch_norm,
    data_parallel,
    epoch_order,
    forget_state,
    gather_to_main,
    is_main,
    loop_state,
    rank_micro_batches,
    rank_share,
    weights_digest,
    world_of,
)
from dpvip.evaluate.coco_instances import CocoInstances, coco_results, coco_scores
from dpvip.evaluate.vitdet import ViTDet, build_vitdet
from dpvip.files import sha256
from dpvip.models.mae import MaskedAutoencoder
from dpvip.plan.pretrain import fingerprint
from dpvip.seeds import derive
from dpvip.train.distributed import Distributed

WARMUP_START = 0.001  # detectron2's warm-up factor: the lr rises linearly from 0.001x
STEP_DECAY = 0.1
STATE = "vitdet"  # the training state's file in the job's work folder: vitdet.pt


@dataclass(frozen=True)
class DetectionSettings:
    """Fine-tuning of ViTDet; the defaults are detectron2's ViTDet-B COCO config (`PAPER`)."""

    iterations: int = 184_375  # 100 epochs of COCO train2017 at 64 images per step
    batch_size: int = 64
    lr: float = 1e-4
    weight_decay: float = 0.1
    warmup_iterations: int = 250
    lr_steps: tuple[float, ...] = (163_889 / 184_375, 177_546 / 184_375)  # fractions of the run; x0.1 at each
    layer_decay: float = 0.7  # 1.0: the same lr everywhere
    drop_path: float = 0.1
    image_size: int = 1024
    pyramid_channels: int = 256
    head_convs: int = 4  # 3x3 convs of the box head (then one fc) and of the mask head
    rois_per_image: int = 512  # sampled RoIs per image for the box head (detectron2: 512)
    proposals_per_image: int = 1000  # RPN proposals kept after NMS (detectron2: 1000)
    score_threshold: float = 0.05  # detections scored below are dropped before COCOeval (detectron2: 0.05)
    horizontal_flip: bool = True
    micro_batch: int = 1  # images per forward pass (detectron2's images per GPU); part of the result
    checkpoint_every: int = 500  # steps between saved states (and on SIGTERM); not part of the result
    seed: int = 0

    OPERATIONAL = ("checkpoint_every",)  # left out of the fingerprint a resumed run must match

    def check(self) -> None:
        at_least_one = (
            "iterations",
            "batch_size",
            "micro_batch",
            "checkpoint_every",
            "image_size",
            "pyramid_channels",
            "rois_per_image",
            "proposals_per_image",
        )
        for name in at_least_one:
            if getattr(self, name) < 1:
                raise DpvipInputError(f"detection setting {name} must be at least 1, not {getattr(self, name)}")
        if not self.lr > 0:
            raise DpvipInputError(f"detection setting lr must be positive, not {self.lr}")
        for name in ("weight_decay", "warmup_iterations", "head_convs"):
            if getattr(self, name) < 0:
                raise DpvipInputError(f"detection setting {name} must not be negative, not {getattr(self, name)}")
        if not 0 < self.layer_decay <= 1:
            raise DpvipInputError(f"detection setting layer_decay must be in (0, 1], not {self.layer_decay}")
        if not 0 <= self.score_threshold < 1:
            raise DpvipInputError(f"detection setting score_threshold must be in [0, 1), not {self.score_threshold}")
        if not 0 <= self.drop_path < 1:
            raise DpvipInputError(f"detection setting drop_path must be in [0, 1), not {self.drop_path}")
        steps = tuple(self.lr_steps)
        if any(not 0 < step <= 1 for step in steps) or list(steps) != sorted(steps):
            raise DpvipInputError(f"detection setting lr_steps must be increasing fractions in (0, 1], not {steps}")


PAPER = DetectionSettings()


def _flipped(image: torch.Tensor, target: dict) -> tuple[torch.Tensor, dict]:
    width = image.shape[-1]
    boxes = target["boxes"][:, [2, 1, 0, 3]] * torch.tensor([-1.0, 1.0, -1.0, 1.0]) + torch.tensor(
        [width, 0.0, width, 0.0]
    )
    return image.flip(-1), target | {"boxes": boxes, "masks": target["masks"].flip(-1)}


def batch_indices(step: int, batch: int, count: int, seed: int) -> list[int]:
    """Dataset indices of step `step`'s global batch: positions step * batch onwards of an
    endless stream of epochs, each a shuffle of (seed, epoch)."""
    return [
        epoch_order(count, seed, position // count)[position % count]
        for position in range(step * batch, (step + 1) * batch)
    ]


def _optimizer(model: ViTDet, settings: DetectionSettings) -> torch.optim.AdamW:
    groups = param_groups_layer_decay(model, settings.weight_decay, layer_decay=settings.layer_decay)
    for group in groups:  # plain AdamW does not read timm's lr_scale: set each group's lr
        group["lr"] = settings.lr * group.pop("lr_scale")
    return torch.optim.AdamW(groups, lr=settings.lr, betas=(0.9, 0.999))


def lr_factor(step: int, settings: DetectionSettings) -> float:
    """detectron2's schedule as a factor of the lr: linear warm-up from 0.001x over
    `warmup_iterations`, times 0.1 for each of `lr_steps` (fractions of the run) passed."""
    warm = 1.0
    if step < settings.warmup_iterations:
        alpha = step / settings.warmup_iterations
        warm = WARMUP_START * (1 - alpha) + alpha
    passed = sum(step >= round(fraction * settings.iterations) for fraction in settings.lr_steps)
    return warm * STEP_DECAY**passed


def _example(data: CocoInstances, index: int, flip: bool) -> tuple[torch.Tensor, dict]:
    example = data[index]
    return _flipped(*example) if flip else example


def _micro_batch_loss(
    network: torch.nn.Module,
    data: CocoInstances,
    indices: list[int],
    flips: torch.Tensor,
    batch_size: int,
    device: torch.device,
    micro: MicroBatch,
) -> torch.Tensor:
    """The micro-batch's losses (torchvision's, summed over the parts) times its share of the batch."""
    batch = [_example(data, indices[position], bool(flips[position])) for position in micro.positions]
    images = [image.to(device) for image, _ in batch]
    targets = [
        {key: value.to(device) if torch.is_tensor(value) else value for key, value in target.items()}
        for _, target in batch
    ]
    parts = network(images, targets)
    return sum(parts.values()) * (len(batch) / batch_size)


def train_detector(
    mae: MaskedAutoencoder,
    train_json: str | Path,
    train_root: str | Path,
    settings: DetectionSettings,
    progress: bool = True,
    work_dir: str | Path | None = None,
    dist: Distributed | None = None,
) -> ViTDet:
    """ViTDet on a copy of `mae`'s encoder, fine-tuned end to end on a COCO-format set (the
    given model is left as it was). Returns the detector in eval mode, with
    `training_record` (image and instance counts, the loss of every step) and
    `category_ids` (the annotation file's ids of labels 1..K). With `work_dir` the loop's
    state is saved there (`vitdet.pt`) and a rerun resumes from it; with `dist` of several
    processes each takes its micro-batches of every step under DDP."""
    settings.check()
    micro_batches = _rank_micro_batches(settings, dist)
    data = CocoInstances(train_json, train_root)
    if len(data) == 0:
        raise DpvipInputError(f"COCO training set {train_json} has no images")
    torch.manual_seed(settings.seed)
    model = build_vitdet(
        mae,
        len(data.category_ids),
        settings.image_size,
        settings.pyramid_channels,
        settings.head_convs,
        settings.drop_path,
        settings.rois_per_image,
        settings.proposals_per_image,
        settings.score_threshold,
    )
    check_no_batch_norm(model, "ViTDet")
    device = dist.device if dist is not None else next(mae.parameters()).device
    model.to(device)
    optimizer = _optimizer(model, settings)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, settings))
    identity = {
        "settings": fingerprint(settings),
        "encoder": {"settings": asdict(mae.settings), "weights": weights_digest(mae)},
        "data": sha256(train_json),
    }
    network = data_parallel(model, dist)
    losses: list[float] = []
    with loop_state(work_dir, STATE, identity, settings.checkpoint_every, dist) as saved:
        state = saved.restore(device)
        start = 0
        if state:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            schedule.load_state_dict(state["schedule"])
            losses, start = list(state["losses"]), state["step"]
        model.train()
        bar = tqdm(
            total=settings.iterations,
            initial=start,
            desc="ViTDet",
            unit="step",
            disable=not (progress and is_main(dist)),
            mininterval=5,
        )
        for step in range(start, settings.iterations):
            indices = batch_indices(step, settings.batch_size, len(data), settings.seed)
            flips = (
                torch.rand(settings.batch_size, generator=augmentation_generator(settings.seed, step)) < 0.5
                if settings.horizontal_flip
                else torch.zeros(settings.batch_size, dtype=torch.bool)
            )
            optimizer.zero_grad(set_to_none=True)
            share = accumulate_gradients(
                network,
                micro_batches,
                partial(_micro_batch_loss, network, data, indices, flips, settings.batch_size, device),
                partial(derive, settings.seed, MODEL, step),
                dist,
            )
            loss = share if dist is None else dist.sum(share)
            if not math.isfinite(loss):
                raise FloatingPointError(f"ViTDet loss is {loss} at step {step}; lower the lr")
            optimizer.step()
            schedule.step()
            losses.append(loss)
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
            bar.update()
            saved.after_step(
                step + 1,
                lambda: {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "schedule": schedule.state_dict(),
                    "losses": losses,
                },
                last=step + 1 == settings.iterations,
            )
        bar.close()
    model.category_ids = data.category_ids
    model.training_record = {"train_images": len(data), "train_instances": data.instances(), "losses": losses}
    return model.eval()


def _rank_micro_batches(settings: DetectionSettings, dist: Distributed | None) -> list[MicroBatch]:
    if settings.batch_size < world_of(dist):
        raise DpvipInputError(
            f"detection setting batch_size {settings.batch_size} is smaller than the {world_of(dist)} processes"
        )
    return rank_micro_batches(settings.batch_size, settings.micro_batch, dist)


@torch.no_grad()
def detections(
    model: ViTDet, data: CocoInstances, category_ids: list[int], batch_size: int = 8, dist: Distributed | None = None
) -> list[dict] | None:
    """`model`'s detections of every image of `data` in COCO's result format, in image order,
    on rank 0 (None on the others). Several processes take the batches round-robin, so an
    image is detected in the same batch whatever their number."""
    model.eval()
    device = next(model.parameters()).device
    found: dict[int, list[dict]] = {}
    for start in rank_share(range(0, len(data), batch_size), dist):
        chosen = range(start, min(start + batch_size, len(data)))
        outputs = [
            {key: value.cpu() for key, value in output.items()}
            for output in model([data.image(index).to(device) for index in chosen])
        ]
        for index, output in zip(chosen, outputs):
            found[index] = coco_results(data.image_ids[index], output, category_ids)
    found = gather_to_main(found, dist)
    return None if found is None else [result for index in sorted(found) for result in found[index]]


def score_detector(
    model: ViTDet,
    val_json: str | Path,
    val_root: str | Path,
    batch_size: int = 8,
    dist: Distributed | None = None,
) -> dict:
    """Box and mask AP (COCOeval, in percent) of `model` on a COCO-format set: "ap_box",
    "ap50_box", "ap75_box" and the same for "mask", with image, instance and detection counts.
    With several processes the detections are gathered and scored on rank 0, and every
    process returns the record."""
    data = CocoInstances(val_json, val_root)
    instances = len(data.coco.getAnnIds(iscrowd=False))
    if instances == 0:
        raise DpvipInputError(f"COCO validation set {val_json} has no instances to score")
    category_ids = getattr(model, "category_ids", data.category_ids)
    if sorted(category_ids) != data.category_ids:
        raise DpvipInputError(
            f"COCO validation set {val_json} has categories {data.category_ids}, "
            f"the detector was trained on {category_ids}"
        )
    results = detections(model, data, category_ids, batch_size, dist)
    return broadcast_from_main(coco_scores(data, results, instances) if is_main(dist) else None, dist)


def evaluate_coco(
    mae: MaskedAutoencoder,
    train_json: str | Path,
    train_root: str | Path,
    val_json: str | Path,
    val_root: str | Path,
    settings: DetectionSettings,
    progress: bool = True,
    work_dir: str | Path | None = None,
    dist: Distributed | None = None,
) -> dict:
    """Fine-tune ViTDet on the training set, score it on the validation set: the scores with
    what produced them. With `work_dir` the training resumes from its saved state, which is
    deleted once the scores exist; with `dist` the processes share the training and the
    scoring, and all of them return the record (rank 0 is the one to write it)."""
    started = time.perf_counter()
    model = train_detector(mae, train_json, train_root, settings, progress, work_dir, dist)
    trained = time.perf_counter()
    scores = score_detector(model, val_json, val_root, dist=dist)
    forget_state(work_dir, STATE, dist)
    training = model.training_record
    return scores | {
        "train_images": training["train_images"],
        "train_instances": training["train_instances"],
        "categories": len(model.category_ids),
        "encoder": asdict(mae.settings),
        "settings": asdict(settings),
        "losses": {
            "first": training["losses"][0],
            "last": training["losses"][-1],
            "mean_last_10": float(np.mean(training["losses"][-10:])),
        },
        "seconds": {"train": trained - started, "score": time.perf_counter() - trained},
    }
