"""Few-shot fine-tuning: the whole encoder and a head learn, the decoder stays out, the
given model is untouched, runs repeat for a seed, AutoAugment works on normalised tensors."""

import pytest
import torch

from dpvip.errors import DpvipInputError
from dpvip.evaluate.datasets import LabelledImages
from dpvip.evaluate.features import FeatureChoice
from dpvip.evaluate.accuracy import classifier_accuracy
from dpvip.per_example import PER_EXAMPLE, read_correctness
from dpvip.evaluate.finetune import (
    AutoAugmented,
    Classifier,
    FinetuneSettings,
    finetune,
    finetune_grid,
)
from dpvip.models import MAESettings
from dpvip.selection import Selection
from dpvip.models.mae import MaskedAutoencoder

QUICK = FinetuneSettings(epochs=6, warmup_epochs=1, batch_size=16, lr=1e-3, auto_augment=False)


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def mae() -> MaskedAutoencoder:
    torch.manual_seed(0)
    return MaskedAutoencoder(MAESettings("pico", image_size=16, patch_size=4))


def bright_or_dark(count: int, seed: int) -> LabelledImages:
    """Two classes anyone can tell apart: images around -1 or +1 (normalised units)."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(count) % 2
    images = (labels.float() * 2 - 1).view(-1, 1, 1, 1) + 0.3 * torch.randn(count, 3, 16, 16, generator=generator)
    return LabelledImages(images, labels, 2, "bright-or-dark")


def test_the_encoder_and_head_train_and_the_decoder_stays_out():
    classifier = Classifier(mae(), 2, FeatureChoice())
    trainable = {name for name, p in classifier.named_parameters() if p.requires_grad}
    assert (
        "head.weight" in trainable
        and "mae.blocks.0.attn.qkv.weight" in trainable
        and "mae.patch_embed.proj.weight" in trainable
    )
    assert not any(name.startswith(("mae.decoder", "mae.mask_token")) for name in trainable)
    assert classifier(torch.zeros(3, 3, 16, 16)).shape == (3, 2)


def test_fine_tuning_learns_an_easy_task_and_leaves_the_given_model_alone():
    model = mae()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    classifier = finetune(model, bright_or_dark(32, seed=1), QUICK)
    assert classifier_accuracy(classifier, bright_or_dark(40, seed=2)) >= 0.9
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    tuned = classifier.mae.state_dict()
    assert not torch.equal(tuned["blocks.0.attn.qkv.weight"], before["blocks.0.attn.qkv.weight"])  # full fine-tuning


def test_a_seed_repeats_the_run():
    data = bright_or_dark(16, seed=3)
    first, second = finetune(mae(), data, QUICK), finetune(mae(), data, QUICK)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values()))


def test_auto_augment_keeps_shape_and_changes_images():
    torch.manual_seed(0)
    images = torch.randn(8, 3, 16, 16)
    augmented = AutoAugmented()(images)
    assert augmented.shape == images.shape and augmented.dtype == torch.float32
    assert not torch.allclose(augmented, images, atol=0.05)


def test_the_grid_reports_every_lr_and_the_best():
    result = finetune_grid(mae(), bright_or_dark(16, seed=4), bright_or_dark(16, seed=5), QUICK, [1e-3, 1e-9])
    assert set(result["grid"]) == {1e-3, 1e-9}
    assert result["accuracy"] == max(result["grid"].values()) and result["lr"] == max(
        result["grid"], key=result["grid"].get
    )
    bits, test_set = read_correctness(result[PER_EXAMPLE])  # the chosen point's, for paired comparisons
    assert 100 * bits.mean() == pytest.approx(100 * result["accuracy"]) and test_set.startswith("bright-or-dark:")


def test_the_grid_chooses_on_validation_when_asked():
    """A validation split whose labels are flipped: the point best on it is the worst on test,
    and that is the one chosen (its test accuracy reported); without a split, a refusal."""
    train, test = bright_or_dark(16, seed=4), bright_or_dark(16, seed=5)
    flipped = bright_or_dark(16, seed=6)
    flipped = LabelledImages(flipped.images, 1 - flipped.labels, 2, "flipped")
    selection = Selection(fraction=0.2, seed=0)
    result = finetune_grid(mae(), train, test, QUICK, [1e-3, 1e-9], validation=flipped, selection=selection)
    assert result["lr"] == max(result["validation"], key=result["validation"].get)
    assert result["accuracy"] == result["grid"][result["lr"]] and result["selection"]["mode"] == "validation"
    on_test = finetune_grid(mae(), train, test, QUICK, [1e-3, 1e-9])
    assert result["grid"] == on_test["grid"]  # the same runs; only the pick differs
    if on_test["grid"][1e-3] != on_test["grid"][1e-9]:
        assert result["lr"] != on_test["lr"]
    with pytest.raises(DpvipInputError, match="needs a validation split"):
        finetune_grid(mae(), train, test, QUICK, [1e-3], selection=selection)


@pytest.mark.parametrize(
    "change", [{"epochs": 0}, {"lr": 0.0}, {"batch_size": 0}, {"features": FeatureChoice(pooling="max")}]
)
def test_bad_settings_are_refused(change):
    from dataclasses import replace

    with pytest.raises(DpvipInputError):
        finetune(mae(), bright_or_dark(4, seed=0), replace(QUICK, **change))


def test_the_head_is_made_where_the_encoder_is():
    """A GPU job moves the encoder before the head exists (DP fine-tuning on the H200 failed
    with the head left on the CPU): the head follows the encoder's device (meta here)."""
    with torch.device("meta"):
        encoder = MaskedAutoencoder(MAESettings("pico", image_size=16, patch_size=4))
    classifier = Classifier(encoder, 3, FeatureChoice())
    assert classifier.head.weight.device.type == "meta" and classifier.head.bias.device.type == "meta"
