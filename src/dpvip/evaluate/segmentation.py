"""Semantic segmentation of MAE encoders: ViP Table 4, "ADE20K mIoU".

ViP A.4 follows MAE (He et al. 2022): UperNet on the pre-trained encoder (see `upernet`),
fine-tuned end to end for 100 epochs at batch 16 (MAE: 160k iterations) on 512x512 crops,
AdamW (lr 1e-4, weight decay 0.05, betas 0.9/0.999), layer-wise lr decay 0.65, linear
warm-up (MAE: 1,500 iterations) then polynomial (power 1) decay to 0, cross-entropy over
150 classes with ADE20K's label 0 ("other") ignored, an auxiliary FCN head weighted 0.4.
The score is the mean IoU over the validation set (single scale).

The data (`SegmentationSet`s of ADE20K and of the embedded stand-in) is `segmentation_data`'s.
Augmentation is a horizontal flip only; mmseg's random rescale (0.5-2x), random crop and
photometric distortion are not applied.

Each step's batch is cut into micro-batches of `micro_batch` images, one forward and
backward each, spread over the processes (see `dense_training`); the loss stays the mean
over the whole batch's labelled pixels (each micro-batch's summed cross-entropy is divided
by the batch's count). The epoch order, the flips and the dropout are functions of (seed,
epoch or step, micro-batch), so a run killed and resumed from its saved state (every
`checkpoint_every` steps and on SIGTERM) ends with the weights of an uninterrupted one, and
the number of processes changes the result only by float rounding. The networks have no
BatchNorm (GroupNorm in the heads), so nothing depends on how a batch is cut.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from timm.optim import param_groups_layer_decay
from timm.scheduler import PolyLRScheduler
from torch import nn
from tqdm import tqdm

from dpvip.errors import DpvipInputError
from dpvip.evaluate.dense_training import (
    MODEL,
    MicroBatch,
    accumulate_gradients,
    augmentation_generator,
    check_no_batch_norm,
    data_parallel,
    epoch_order,
    forget_state,
    is_main,
    loop_state,
    rank_micro_batches,
    rank_share,
    tensors_digest,
    weights_digest,
)
from dpvip.evaluate.segmentation_data import IGNORE_INDEX, SegmentationSet
from dpvip.evaluate.upernet import Segmenter
from dpvip.models.mae import MaskedAutoencoder, encoder_at
from dpvip.plan.pretrain import fingerprint
from dpvip.seeds import derive
from dpvip.train.distributed import Distributed

STATE = "upernet"  # the training state's file in the job's work folder: upernet.pt


# --- training ------------------------------------------------------------------------------
@dataclass(frozen=True)
class SegmentationSettings:
    """Defaults are the paper's (ViP A.4 / MAE) for ViT-B at 512 px; the image size is the
    data's. `channels` is the UPerNet width (768 in mmseg's MAE-B config), `aux_channels`
    the FCN head's (256; 0 drops the auxiliary head)."""

    epochs: int = 100
    batch_size: int = 16
    lr: float = 1e-4
    weight_decay: float = 0.05
    layer_decay: float = 0.65
    warmup_epochs: float = 1.2  # MAE: 1,500 iterations, ~1.2 epochs of ADE20K at batch 16
    channels: int = 768
    aux_channels: int = 256
    aux_weight: float = 0.4  # 0 leaves the auxiliary head out
    flip: bool = True
    micro_batch: int = 2  # images per forward pass (mmseg: 2 per GPU); part of the result
    checkpoint_every: int = 500  # steps between saved states (and on SIGTERM); not part of the result
    seed: int = 0

    OPERATIONAL = ("checkpoint_every",)  # left out of the fingerprint a resumed run must match

    def check(self) -> None:
        rules = {
            "epochs": self.epochs >= 1,
            "batch_size": self.batch_size >= 1,
            "micro_batch": self.micro_batch >= 1,
            "checkpoint_every": self.checkpoint_every >= 1,
            "lr": self.lr > 0,
            "weight_decay": self.weight_decay >= 0,
            "layer_decay": 0 < self.layer_decay <= 1,
            "warmup_epochs": 0 <= self.warmup_epochs <= self.epochs,
            "channels": self.channels >= 1,
            "aux_channels": self.aux_channels >= 0,
            "aux_weight": self.aux_weight >= 0,
        }
        for name, valid in rules.items():
            if not valid:
                raise DpvipInputError(f"segmentation setting {name} = {getattr(self, name)!r} is out of range")


def _optimizer(model: Segmenter, settings: SegmentationSettings) -> torch.optim.AdamW:
    # The class token is a (width, 1) weight here, but a token all the same: no decay, as MAE.
    groups = param_groups_layer_decay(
        model, settings.weight_decay, no_weight_decay_list=["mae.cls_token.weight"], layer_decay=settings.layer_decay
    )
    return torch.optim.AdamW(groups, lr=settings.lr, betas=(0.9, 0.999))


def _flipped(images: torch.Tensor, masks: torch.Tensor, flip: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.where(flip.view(-1, 1, 1, 1), images.flip(-1), images), torch.where(
        flip.view(-1, 1, 1), masks.flip(-1), masks
    )


class PixelLoss(nn.Module):
    """The segmenter's cross-entropy summed over the labelled pixels of a micro-batch (plus the
    auxiliary head's, weighted): a module, so that DDP sees the loss computed in `forward`."""

    def __init__(self, segmenter: Segmenter, aux_weight: float):
        super().__init__()
        self.segmenter, self.aux_weight = segmenter, aux_weight

    def forward(self, images: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
        main, aux = self.segmenter.logits(images)
        loss = F.cross_entropy(main, masks, ignore_index=IGNORE_INDEX, reduction="sum")
        if aux is not None:
            loss = loss + self.aux_weight * F.cross_entropy(aux, masks, ignore_index=IGNORE_INDEX, reduction="sum")
        return loss


def _micro_batch_loss(
    network: nn.Module,
    images: torch.Tensor,
    masks: torch.Tensor,
    labelled: int,
    device: torch.device,
    micro: MicroBatch,
) -> torch.Tensor:
    """The micro-batch's summed loss over the batch's labelled pixel count."""
    chosen = slice(micro.positions.start, micro.positions.stop)
    return network(images[chosen].to(device), masks[chosen].to(device)) / max(labelled, 1)


def train_segmenter(
    mae: MaskedAutoencoder,
    train: SegmentationSet,
    settings: SegmentationSettings,
    progress: bool = True,
    work_dir: str | Path | None = None,
    dist: Distributed | None = None,
) -> Segmenter:
    """UPerNet on a copy of `mae`'s encoder (rebuilt for the data's image size), fine-tuned
    end to end on `train`; the given model is left as it was. With `work_dir` the loop's
    state is saved there (`upernet.pt`) and a rerun resumes from it; with `dist` of several
    processes each takes its micro-batches of every step under DDP."""
    settings.check()
    if len(train) == 0:
        raise DpvipInputError("segmentation needs at least one training image")
    image_size = train.images.shape[-1]
    if image_size % mae.patch_size:
        raise DpvipInputError(
            f"segmentation image size {image_size} is not a multiple of the MAE's patch size {mae.patch_size}"
        )
    torch.manual_seed(settings.seed)
    device = dist.device if dist is not None else next(mae.parameters()).device
    aux_channels = settings.aux_channels if settings.aux_weight else 0  # an unweighted head would not train
    model = Segmenter(encoder_at(mae, image_size), train.classes, settings.channels, aux_channels).to(device)
    check_no_batch_norm(model, "UPerNet")
    optimizer = _optimizer(model, settings)
    batch = min(settings.batch_size, len(train))
    steps_per_epoch = math.ceil(len(train) / batch)
    total = settings.epochs * steps_per_epoch
    warmup = min(round(settings.warmup_epochs * steps_per_epoch), total - 1)
    # timm's scheduler multiplies each group's lr by its layer-decay `lr_scale`.
    scheduler = PolyLRScheduler(
        optimizer, t_initial=total - warmup, power=1.0, warmup_t=warmup, warmup_prefix=True, t_in_epochs=False
    )
    identity = {
        "settings": fingerprint(settings),
        "encoder": {"settings": asdict(mae.settings), "weights": weights_digest(mae)},
        "data": {"name": train.name, "classes": train.classes, "digest": tensors_digest(train.images, train.masks)},
    }
    network = data_parallel(PixelLoss(model, settings.aux_weight), dist)
    epoch_loss = 0.0
    with loop_state(work_dir, STATE, identity, settings.checkpoint_every, dist) as saved:
        state = saved.restore(device)
        start = 0
        if state:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            model.epoch_losses, epoch_loss, start = list(state["epoch_losses"]), state["epoch_loss"], state["step"]
        model.train()
        bar = tqdm(
            total=total,
            initial=start,
            desc=f"segmentation {train.name}",
            unit="step",
            disable=not (progress and is_main(dist)),
            mininterval=2,
        )
        for step in range(start, total):
            epoch, position = divmod(step, steps_per_epoch)
            order = epoch_order(len(train), settings.seed, epoch)
            chosen = torch.tensor(order[position * batch : (position + 1) * batch])
            images, masks = train.images[chosen], train.masks[chosen]
            if settings.flip:
                images, masks = _flipped(
                    images, masks, torch.rand(len(chosen), generator=augmentation_generator(settings.seed, step)) < 0.5
                )
            labelled = int((masks != IGNORE_INDEX).sum())
            scheduler.step_update(step)
            optimizer.zero_grad(set_to_none=True)
            share = accumulate_gradients(
                network,
                rank_micro_batches(len(chosen), settings.micro_batch, dist),
                partial(_micro_batch_loss, network, images, masks, labelled, device),
                partial(derive, settings.seed, MODEL, step),
                dist,
            )
            loss = share if dist is None else dist.sum(share)
            optimizer.step()
            epoch_loss += loss * len(chosen)
            if position == steps_per_epoch - 1:
                model.epoch_losses.append(epoch_loss / len(train))
                epoch_loss = 0.0
            bar.update()
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
            saved.after_step(
                step + 1,
                lambda: {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "epoch_losses": model.epoch_losses,
                    "epoch_loss": epoch_loss,
                },
                last=step + 1 == total,
            )
        bar.close()
    return model.eval()


# --- scores --------------------------------------------------------------------------------
def confusion_matrix(
    predictions: torch.Tensor, masks: torch.Tensor, classes: int, ignore_index: int = IGNORE_INDEX
) -> torch.Tensor:
    """(classes, classes) int64 pixel counts, rows the truth, columns the prediction;
    pixels whose truth is `ignore_index` are left out."""
    truth, predicted = masks.reshape(-1).long(), predictions.reshape(-1).long()
    kept = truth != ignore_index
    truth, predicted = truth[kept], predicted[kept]
    for name, values in (("mask", truth), ("prediction", predicted)):
        outside = values[(values < 0) | (values >= classes)]
        if len(outside):
            raise DpvipInputError(
                f"{name} holds class {int(outside[0])}, outside 0..{classes - 1} and not ignored ({ignore_index})"
            )
    return torch.bincount(truth * classes + predicted, minlength=classes * classes).reshape(classes, classes)


def scores_from_confusion(confusion: torch.Tensor) -> dict:
    """Per-class IoU = TP / (TP + FP + FN) over the whole set; a class absent from both truth
    and prediction has no IoU (None) and is left out of the mean, as mmseg's nanmean does.
    mIoU and pixel accuracy (correct / labelled pixels, mmseg's aAcc) are in percent."""
    confusion = confusion.double()
    hits = confusion.diagonal()
    union = confusion.sum(0) + confusion.sum(1) - hits
    iou = torch.where(union > 0, hits / union.clamp(min=1), torch.full_like(hits, float("nan")))
    present = ~iou.isnan()
    labelled = float(confusion.sum())
    return {
        "miou": 100 * float(iou[present].mean()) if present.any() else float("nan"),
        "pixel_accuracy": 100 * float(hits.sum()) / labelled if labelled else float("nan"),
        "per_class": [100 * float(v) if not math.isnan(v) else None for v in iou.tolist()],
    }


def mean_iou(predictions: torch.Tensor, masks: torch.Tensor, classes: int, ignore_index: int = IGNORE_INDEX) -> dict:
    """mIoU, pixel accuracy and per-class IoU (percent) of predicted class maps against masks."""
    return scores_from_confusion(confusion_matrix(predictions, masks, classes, ignore_index))


def most_frequent_class(train: SegmentationSet) -> int:
    """The class of most labelled training pixels (background on the stand-in)."""
    labelled = train.masks[train.masks != IGNORE_INDEX]
    return int(torch.bincount(labelled.reshape(-1), minlength=train.classes).argmax())


def trivial_scores(train: SegmentationSet, test: SegmentationSet) -> dict:
    """The scores of the trivial segmenter that knows no image: every test pixel the training
    split's most frequent class. A segmenter that learnt something scores above it."""
    common = most_frequent_class(train)
    scores = mean_iou(torch.full_like(test.masks, common), test.masks, test.classes)
    return {"class": common, "miou": scores["miou"], "pixel_accuracy": scores["pixel_accuracy"]}


@torch.no_grad()
def score_segmenter(
    model: Segmenter, test: SegmentationSet, batch_size: int = 16, dist: Distributed | None = None
) -> dict:
    """Scores of `model`'s argmax predictions on `test`, accumulated batch by batch; with
    several processes the batches are handed round-robin and the pixel counts summed."""
    model.eval()
    device = next(model.parameters()).device
    confusion = torch.zeros(test.classes, test.classes, dtype=torch.long, device=device)
    for start in rank_share(range(0, len(test), batch_size), dist):
        images, masks = test.images[start : start + batch_size], test.masks[start : start + batch_size]
        confusion += confusion_matrix(model(images.to(device)).argmax(1).cpu(), masks, test.classes).to(device)
    if dist is not None:
        dist.sum_tensor(confusion)
    return scores_from_confusion(confusion.cpu())


def evaluate_ade(
    mae: MaskedAutoencoder,
    train: SegmentationSet,
    test: SegmentationSet,
    settings: SegmentationSettings,
    progress: bool = True,
    work_dir: str | Path | None = None,
    dist: Distributed | None = None,
) -> dict:
    """Fine-tune UPerNet on `train`, score on `test`: the scores with what produced them.
    With `work_dir` the training resumes from its saved state, which is deleted once the
    scores exist; with `dist` the processes share the training and the scoring, and all of
    them return the record (rank 0 is the one to write it)."""
    if train.classes != test.classes:
        raise DpvipInputError(f"segmentation train set has {train.classes} classes but the test set {test.classes}")
    if train.images.shape[-2:] != test.images.shape[-2:]:
        sizes = tuple(test.images.shape[-2:]), tuple(train.images.shape[-2:])
        raise DpvipInputError(f"segmentation test images are {sizes[0]} px but the training images {sizes[1]}")
    started = time.perf_counter()
    model = train_segmenter(mae, train, settings, progress, work_dir, dist)
    trained = time.perf_counter()
    scores = score_segmenter(model, test, dist=dist)
    forget_state(work_dir, STATE, dist)
    return scores | {
        "trivial": trivial_scores(train, test),
        "dataset": {"train": train.name, "test": test.name},
        "train_images": len(train),
        "test_images": len(test),
        "classes": train.classes,
        "image_size": train.images.shape[-1],
        "taps": list(model.taps),
        "settings": asdict(settings),
        "epoch_losses": model.epoch_losses,
        "seconds": {"train": trained - started, "score": time.perf_counter() - trained},
    }
