"""MAE checkpoints: weights travel with their settings; loading refuses another architecture
by name and takes the expected mask ratio."""

from __future__ import annotations

import pytest
import torch

from dpvip.errors import DpvipInputError
from dpvip.models.checkpoint import load_mae, read_mae, save_mae
from dpvip.models.mae import MaskedAutoencoder, MAESettings

SETTINGS = MAESettings("micro", image_size=32, patch_size=4)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    torch.manual_seed(0)
    model = MaskedAutoencoder(SETTINGS)
    with torch.no_grad():  # weights unlike a fresh initialisation
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    path = tmp_path_factory.mktemp("mae") / "model.pt"
    save_mae(model, path, {"stage": "test", "steps": 3})
    return model.eval(), path


def inputs():
    generator = torch.Generator().manual_seed(5)
    return torch.randn(2, 3, 32, 32, generator=generator), torch.rand(2, 64, generator=generator)


def test_a_saved_mae_loads_to_the_same_outputs(saved):
    model, path = saved
    loaded, record = load_mae(path)
    assert record == {"stage": "test", "steps": 3}
    assert loaded.settings == SETTINGS
    images, noise = inputs()
    with torch.no_grad():
        expected, got = model(images, noise), loaded.eval()(images, noise)
    assert torch.equal(got.loss, expected.loss) and torch.equal(got.prediction, expected.prediction)
    assert torch.equal(got.mask, expected.mask)
    assert read_mae(path)["format"] == "dpvip.mae/1"


@pytest.mark.parametrize(
    "expected, named",
    [
        (MAESettings("mini", image_size=32, patch_size=4), "holds an MAE with size 'micro', not 'mini'"),
        (MAESettings("micro", image_size=64, patch_size=4), "holds an MAE with image_size 32, not 64"),
        (MAESettings("micro", image_size=32, patch_size=8), "holds an MAE with patch_size 4, not 8"),
        (
            MAESettings("micro", image_size=32, patch_size=4, decoder_depth=3),
            "holds an MAE with decoder_depth 2, not 3",
        ),
    ],
)
def test_another_architecture_is_refused_by_name(saved, expected, named):
    _, path = saved
    with pytest.raises(DpvipInputError) as caught:
        load_mae(path, expected)
    assert str(caught.value) == f"checkpoint {path} {named}"


def test_the_same_architecture_spelled_explicitly_loads(saved):
    """decoder_depth None means the size's default (2 for micro): the same network."""
    model, path = saved
    loaded, _ = load_mae(path, MAESettings("micro", image_size=32, patch_size=4, decoder_depth=2))
    assert len(loaded.decoder_blocks) == len(model.decoder_blocks) == 2


def test_the_expected_mask_ratio_and_loss_settings_are_used(saved):
    model, path = saved
    loaded, _ = load_mae(path, MAESettings("micro", image_size=32, patch_size=4, mask_ratio=0.5, norm_pix_loss=False))
    assert loaded.settings.mask_ratio == 0.5 and loaded.settings.norm_pix_loss is False
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    images, noise = inputs()
    with torch.no_grad():
        output = loaded.eval()(images, noise)
    assert output.mask.sum(dim=1).tolist() == [32.0, 32.0]  # half of the 64 patches masked


def test_a_file_that_is_not_a_dpvip_mae_is_refused(tmp_path):
    foreign = tmp_path / "foreign.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, foreign)
    with pytest.raises(DpvipInputError, match=f"^{foreign} is not an MAE checkpoint of dpvip"):
        load_mae(foreign)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all")
    with pytest.raises(DpvipInputError, match=f"^checkpoint {garbage} cannot be read"):
        load_mae(garbage)
    with pytest.raises(DpvipInputError, match="does not exist"):
        load_mae(tmp_path / "missing.pt")
