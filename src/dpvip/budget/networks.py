"""FLOPs per example (or per image, or per step) of every network the workflow trains or
runs, counted on the networks the jobs build, at their configured size and resolution, with
a batch of one (Phase I: its whole batch, since its uniformity term compares pairs): on the
`meta` device, or on the CPU for a DP step (see `dpvip.budget.counting`). Results are
kept in the disk memo (`dpvip.memo`, keyed by the sources of the networks and the clipping):
a paper DAG has hundreds of jobs but few shapes, and a DP step counted on the CPU takes up
to a minute for ViT-L.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from dpvip.budget.counting import (
    CPU,
    META,
    count_flops,
    dp_training_flops,
    forward_flops,
    images_on,
    labels_on,
    per_example_losses,
    training_flops,
)
from dpvip.memo import memoised
from dpvip.models import MAESettings

NETWORK_SOURCES = (
    "budget/counting.py",
    "budget/networks.py",
    "models/__init__.py",
    "models/mae.py",
    "models/wrn.py",
    "privacy/clipping.py",
    "privacy/layer_rules.py",
    "evaluate/features.py",
    "evaluate/finetune.py",
    "evaluate/vitdet.py",
    "evaluate/upernet.py",
    "evaluate/cnn_baselines.py",
    "randp/phase1_methods.py",
    "randp/moco.py",
    "randp/contrastive.py",
    "transfer/features.py",
)
counted = memoised("flops", NETWORK_SOURCES, ("torch", "torchvision", "timm", "opacus"))


@dataclass(frozen=True)
class Flops:
    """One example's (or image's) FLOPs of the passes a job makes over it."""

    train: int = 0  # a training pass (forward + backward, with the clipping of a DP step)
    forward: int = 0  # an evaluation or feature pass
    width: int = 0  # features per example, where the network gives features


def _mae(settings: MAESettings, device: torch.device = META):
    from dpvip.models.mae import MaskedAutoencoder

    with torch.device(device):
        return MaskedAutoencoder(settings)


# --- MAE pre-training -------------------------------------------------------------------------
@counted
def mae_pretraining(settings: MAESettings) -> Flops:
    """An MAE step on one image: mask, encode the kept patches, decode, loss; backward."""
    mae = _mae(settings)
    images = images_on(META, 1, settings.image_size)
    noise = torch.rand(1, mae.num_patches, device=META)
    return Flops(train=training_flops(lambda: mae(images, noise).loss))


@counted
def mae_dp_pretraining(settings: MAESettings) -> Flops:
    """A DP-MAE step on one example, as `ClippedGradientSum` runs it (norms and clipped sum)."""
    mae = _mae(settings, CPU)
    images = images_on(CPU, 1, settings.image_size)
    noise = torch.rand(1, mae.num_patches)
    return Flops(train=dp_training_flops(mae, lambda: mae(images, noise).loss))


# --- MAE encoders: features, probes, fine-tuning -----------------------------------------------
@counted
def mae_features(settings: MAESettings, recipe: str) -> Flops:
    """The unmasked encoder on one image: "prelogits" (class token after the final norm, as the
    linear probe and Mehta's heads), "blocks4" (DP-RandP's pooled blocks), or "mean" (the
    mean of the patch tokens, as fine-tuning)."""
    from dpvip.evaluate.features import FeatureChoice, trainable_features
    from dpvip.transfer.features import mae_blocks4

    mae = _mae(settings).eval()
    images = images_on(META, 1, mae.settings.image_size)
    if recipe == "blocks4":
        read = lambda: mae_blocks4(mae, images)  # noqa: E731
    else:
        choice = FeatureChoice(pooling="mean" if recipe == "mean" else "cls")
        read = lambda: trainable_features(mae, images, choice)  # noqa: E731
    shape = {}

    def run():
        with torch.no_grad():
            shape["width"] = read().shape[-1]

    flops = count_flops(run)
    return Flops(forward=flops, width=shape["width"])


@counted
def mae_classifier(
    settings: MAESettings, classes: int, pooling: str, last_blocks: int, final_norm: bool, private: bool
) -> Flops:
    """An MAE encoder with a linear head (few-shot and DP fine-tuning) on one image: a training
    pass (per-example clipped when `private`) and an evaluation pass."""
    from dpvip.evaluate.features import FeatureChoice
    from dpvip.evaluate.finetune import Classifier

    choice = FeatureChoice(pooling=pooling, last_blocks=last_blocks, final_norm=final_norm)
    device = CPU if private else META
    with torch.device(device):
        classifier = Classifier(_mae(settings, device), classes, choice)
    images, labels = images_on(device, 1, settings.image_size), labels_on(device, 1)
    losses = lambda: per_example_losses(classifier(images), labels)  # noqa: E731
    train = dp_training_flops(classifier, losses) if private else training_flops(losses)
    return Flops(train=train, forward=forward_flops(classifier.eval(), images))


@counted
def linear_head(width: int, classes: int, private: bool) -> Flops:
    """A linear classifier on cached features, per example: training (per-example clipped
    when `private`) and evaluation."""
    device = CPU if private else META
    with torch.device(device):
        head = torch.nn.Linear(width, classes)
    features, labels = torch.zeros(1, width, device=device), labels_on(device, 1)
    losses = lambda: per_example_losses(head(features), labels)  # noqa: E731
    train = dp_training_flops(head, losses) if private else training_flops(losses)
    return Flops(train=train, forward=forward_flops(head, features))


# --- ViTDet (COCO) and UPerNet (ADE20K) --------------------------------------------------------
@counted
def vitdet(settings: MAESettings, image_size: int, classes: int, channels: int, head_convs: int) -> Flops:
    """Mask R-CNN on the simple feature pyramid, per image.

    Counted module by module, since proposals, sampling and NMS have data-dependent shapes:
    the pyramid over the encoder at `image_size`, the RPN head on every level, the box head on
    the RoIs sampled per training image (`box_batch_size_per_image`) or the proposals kept
    at test time, the mask head on the sampled foreground RoIs (at most the positive
    fraction) or the detections kept; RoIAlign and NMS are not matrix products."""
    from dpvip.evaluate.vitdet import build_vitdet

    with torch.device(META):
        model = build_vitdet(_mae(settings), classes, image_size, channels, head_convs)
    heads = model.roi_heads
    sampled = heads.fg_bg_sampler.batch_size_per_image
    positives = int(sampled * heads.fg_bg_sampler.positive_fraction)
    test_proposals = model.rpn._post_nms_top_n["testing"]

    def passes(rois: int, masks: int) -> float:
        levels = model.backbone(images_on(META, 1, image_size))
        objectness, deltas = model.rpn.head(list(levels.values()))
        box_features = torch.empty(rois, channels, 7, 7, device=META, requires_grad=True)
        scores, boxes = heads.box_predictor(heads.box_head(box_features))
        mask_features = torch.empty(masks, channels, 14, 14, device=META, requires_grad=True)
        mask_logits = heads.mask_predictor(heads.mask_head(mask_features))
        outputs = [*levels.values(), *objectness, *deltas, scores, boxes, mask_logits]
        return sum(output.sum() for output in outputs)

    model.train()
    train = count_flops(lambda: passes(sampled, positives).backward())
    model.eval()
    with torch.no_grad():
        forward = count_flops(lambda: passes(test_proposals, heads.detections_per_img))
    return Flops(train=train, forward=forward)


@counted
def upernet(settings: MAESettings, image_size: int, classes: int, channels: int, aux_channels: int) -> Flops:
    """UPerNet (and its auxiliary FCN head in training) on the encoder at `image_size`, per image."""
    from dpvip.evaluate.upernet import Segmenter
    from dpvip.models.mae import encoder_at

    with torch.device(META):
        model = Segmenter(encoder_at(_mae(settings), image_size), classes, channels, aux_channels)
    images = images_on(META, 1, image_size)
    masks = torch.zeros(1, image_size, image_size, dtype=torch.long, device=META)

    def loss():
        main, aux = model.logits(images)
        total = F.cross_entropy(main, masks)
        return total if aux is None else total + F.cross_entropy(aux, masks)

    model.train()
    train = training_flops(loss)
    return Flops(train=train, forward=forward_flops(model.eval(), images))


# --- CNN baselines (ViP Table 2) ----------------------------------------------------------------
@counted
def cnn(arch: str, classes: int, image_size: int) -> Flops:
    from dpvip.evaluate.cnn_baselines import build_cnn

    with torch.device(META):
        model = build_cnn(arch, classes)
    # Two images: BatchNorm refuses a batch of one in training (at 32 px ResNet's last map is 1x1).
    images, labels = images_on(META, 2, image_size), labels_on(META, 2)
    train = training_flops(lambda: per_example_losses(model(images), labels))
    return Flops(train=train // 2, forward=forward_flops(model.eval(), images) // 2)


# --- DP-RandP ---------------------------------------------------------------------------------
@counted
def phase1_step(settings) -> int:
    """One Phase I step on its whole batch of view pairs (`Phase1Settings`): the method's loss
    (both views through the encoder; MoCo: queries, momentum keys and the queue) and backward."""
    from dpvip.randp.phase1_methods import build_method

    with torch.device(META):
        method = build_method(settings)
    views = images_on(META, settings.batch_size, settings.image_size)
    return count_flops(lambda: method.loss(views, views).backward())


@counted
def wrn_private(model: str, classes: int, image_size: int, views: int, head_only: bool, private: bool = True) -> Flops:
    """A DP-SGD step's work on one example (its K augmented views, clipped as one): Phase II
    trains the head only (the body runs forward), Phase III the whole network; with `private`
    false, the same step without per-example clipping."""
    from dpvip.models.wrn import WideResNet

    device = CPU if private else META
    with torch.device(device):
        network = WideResNet(model, classes)
    for name, param in network.named_parameters():
        param.requires_grad_(not head_only or name.startswith("classifier."))
    images, labels = images_on(device, views, image_size), labels_on(device, views)
    losses = lambda: per_example_losses(network(images), labels)  # noqa: E731
    train = dp_training_flops(network, losses, views=views) if private else training_flops(losses)
    return Flops(train=train, forward=forward_flops(network.eval(), images_on(device, 1, image_size)))


@counted
def wrn_features(model: str, image_size: int, recipe: str, hidden: int) -> Flops:
    """A Phase I network's features of one image: "prelogits" (the pooled last map) or
    "projection1" (the projection head's first block, `hidden` wide)."""
    from dpvip.models.wrn import ProjectionHead, WideResNet
    from dpvip.transfer.features import wrn_prelogits, wrn_projection1

    with torch.device(META):
        backbone = WideResNet(model, 1)
        in_features = backbone.feature_channels * (image_size // 4) ** 2
        block = ProjectionHead(in_features, hidden).layers[:3]
    images = images_on(META, 1, image_size)
    if recipe == "projection1":
        read = lambda: wrn_projection1(backbone, block, images)  # noqa: E731
    else:
        read = lambda: wrn_prelogits(backbone, images)  # noqa: E731
    shape = {}

    def run():
        with torch.no_grad():
            shape["width"] = read().shape[-1]

    return Flops(forward=count_flops(run), width=shape["width"])
