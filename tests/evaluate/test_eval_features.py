"""Frozen-encoder features: the class token after the final norm is what `encode` gives, mean
pooling averages the patch tokens, the last k blocks are concatenated in block order, and
`extract` batches without changing the result."""

import pytest
import torch

from dpvip.errors import DpvipInputError
from dpvip.evaluate.datasets import LabelledImages
from dpvip.evaluate.features import FeatureChoice, encoder_features, extract
from dpvip.models.mae import MaskedAutoencoder, MAESettings

WIDTH, DEPTH = 96, 4  # the micro encoder


pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture
def model() -> MaskedAutoencoder:
    torch.manual_seed(0)
    return MaskedAutoencoder(MAESettings("micro", image_size=32, patch_size=4)).eval()


@pytest.fixture
def images() -> torch.Tensor:
    return torch.randn(5, 3, 32, 32, generator=torch.Generator().manual_seed(1))


def block_outputs(model, images) -> list[torch.Tensor]:
    """Every encoder block's output tokens during an unmasked `encode`, caught by hooks."""
    outputs = []
    handles = [block.register_forward_hook(lambda _m, _i, out: outputs.append(out)) for block in model.blocks]
    try:
        with torch.no_grad():
            model.encode(images)
    finally:
        for handle in handles:
            handle.remove()
    assert len(outputs) == DEPTH
    return outputs


def close(a, b):
    return torch.allclose(a, b, atol=1e-5, rtol=1e-5)


def test_the_default_is_the_class_token_after_the_final_norm(model, images):
    assert FeatureChoice() == FeatureChoice("cls", 1, True)
    features = encoder_features(model, images, FeatureChoice())
    with torch.no_grad():
        expected = model.encode(images)[:, 0]
    assert features.shape == (5, WIDTH)
    assert close(features, expected)


def test_mean_pooling_averages_the_patch_tokens_without_the_class_token(model, images):
    features = encoder_features(model, images, FeatureChoice(pooling="mean"))
    with torch.no_grad():
        tokens = model.encode(images)
    assert features.shape == (5, WIDTH)
    assert close(features, tokens[:, 1:].mean(dim=1))
    assert not close(features, tokens.mean(dim=1))  # the class token is left out


def test_the_last_two_blocks_are_concatenated_in_block_order(model, images):
    choice = FeatureChoice(last_blocks=2)
    features = encoder_features(model, images, choice)
    assert choice.width(WIDTH) == 2 * WIDTH
    assert features.shape == (5, 2 * WIDTH)
    assert close(features[:, WIDTH:], encoder_features(model, images, FeatureChoice()))
    second_last = block_outputs(model, images)[-2]
    with torch.no_grad():
        assert close(features[:, :WIDTH], model.norm(second_last)[:, 0])


def test_without_the_final_norm_the_raw_block_outputs_are_used(model, images):
    raw = encoder_features(model, images, FeatureChoice(last_blocks=2, final_norm=False))
    normed = encoder_features(model, images, FeatureChoice(last_blocks=2, final_norm=True))
    assert not close(raw, normed)
    outputs = block_outputs(model, images)
    assert close(raw, torch.cat([outputs[-2][:, 0], outputs[-1][:, 0]], dim=1))
    mean = encoder_features(model, images, FeatureChoice(pooling="mean", final_norm=False))
    assert close(mean, outputs[-1][:, 1:].mean(dim=1))


def test_every_block_can_be_kept(model, images):
    features = encoder_features(model, images, FeatureChoice(last_blocks=DEPTH, final_norm=False))
    assert close(features, torch.cat([out[:, 0] for out in block_outputs(model, images)], dim=1))


@pytest.mark.parametrize(
    "choice, message",
    [
        (FeatureChoice(last_blocks=DEPTH + 1), f"last_blocks {DEPTH + 1} is outside 1..{DEPTH}"),
        (FeatureChoice(last_blocks=0), f"last_blocks 0 is outside 1..{DEPTH}"),
        (FeatureChoice(pooling="max"), "feature pooling 'max' is not one of cls, mean"),
    ],
)
def test_impossible_choices_are_refused(model, images, choice, message):
    with pytest.raises(DpvipInputError, match=message):
        encoder_features(model, images, choice)
    with pytest.raises(DpvipInputError, match=message):
        extract(model, labelled(images), choice)


def labelled(images: torch.Tensor) -> LabelledImages:
    return LabelledImages(images, torch.zeros(len(images), dtype=torch.long), 1, "test")


@pytest.mark.parametrize("choice", [FeatureChoice(), FeatureChoice("mean", 2, False)])
def test_extract_in_batches_matches_one_pass_and_sets_eval_mode(model, images, choice):
    model.train()
    features = extract(model, labelled(images), choice, batch_size=2)  # batches of 2, 2 and 1
    assert not model.training and not any(module.training for module in model.modules())
    assert features.dtype == torch.float32 and features.shape == (5, choice.width(WIDTH))
    assert close(features, encoder_features(model, images, choice))
    assert not features.requires_grad
