"""CNN baselines (ViP A.3): both networks build with the downstream classes, checkpoints load
through wrapper prefixes and are refused by the first key that does not fit, small images
are refused for AlexNet, and a short fine-tune and its lr grid run."""

from dataclasses import replace

import pytest
import torch

from dpvip.errors import DpvipInputError
from dpvip.evaluate.cnn_baselines import (
    CNN_BASELINES,
    CNN_FINETUNE,
    build_cnn,
    cnn_finetune,
    cnn_finetune_grid,
    load_backbone,
)
from dpvip.evaluate.datasets import digits

pytestmark = pytest.mark.usefixtures("torch_one_thread")

QUICK = replace(CNN_FINETUNE, epochs=1, warmup_epochs=0, batch_size=8, auto_augment=False)


@pytest.fixture(scope="module")
def resnet_state() -> dict:
    torch.manual_seed(1)
    return build_cnn("resnet50", 1000).state_dict()  # as a torchvision ImageNet checkpoint


@pytest.fixture(scope="module")
def digits64():
    train, test = digits(64)
    return train.subset(range(0, 200, 20)), test.subset(range(0, 60, 6))  # 10 images each


@pytest.mark.parametrize("arch", sorted(CNN_BASELINES))
def test_the_registry_builds_each_network_for_the_downstream_classes(arch):
    torch.manual_seed(0)
    model = build_cnn(arch, 7).eval()
    with torch.no_grad():
        assert model(torch.zeros(2, 3, 64, 64)).shape == (2, 7)


def test_a_simclr_style_checkpoint_loads_through_its_wrapper_prefix(tmp_path, resnet_state):
    path = tmp_path / "simclr.pth"
    torch.save({"epoch": 100, "state_dict": {f"module.{key}": value for key, value in resnet_state.items()}}, path)
    model = build_cnn("resnet50", 10, path)
    loaded = model.state_dict()
    assert torch.equal(loaded["conv1.weight"], resnet_state["conv1.weight"])
    assert torch.equal(loaded["layer4.2.bn3.running_var"], resnet_state["layer4.2.bn3.running_var"])
    assert loaded["fc.weight"].shape == (10, 2048)  # the old 1000-way classifier was dropped


def test_an_encoder_prefix_and_a_projection_head_in_place_of_fc_load(resnet_state):
    state = {f"encoder.{key}": value for key, value in resnet_state.items() if not key.startswith("fc.")}
    state |= {"encoder.fc.0.weight": torch.zeros(2048, 2048), "encoder.fc.2.weight": torch.zeros(128, 2048)}
    model = build_cnn("resnet50", 10)
    load_backbone(model, "resnet50", state, "test")
    assert torch.equal(model.state_dict()["layer1.0.conv1.weight"], resnet_state["layer1.0.conv1.weight"])


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda s: s | {"layer1.0.conv9.weight": s.pop("layer1.0.conv1.weight")}, "missing layer1.0.conv1.weight"),
        (lambda s: s | {"projector.weight": torch.zeros(1)}, "unexpected projector.weight"),
        (lambda s: s | {"conv1.weight": torch.zeros(64, 3, 3, 3)}, "conv1.weight has shape"),
    ],
)
def test_a_checkpoint_that_does_not_fit_is_refused_naming_the_key(resnet_state, change, named):
    with pytest.raises(DpvipInputError, match=named):
        load_backbone(build_cnn("resnet50", 10), "resnet50", change(dict(resnet_state)), "checkpoint x.pth")


def test_unreadable_or_missing_checkpoints_are_refused(tmp_path):
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"not a checkpoint")
    with pytest.raises(DpvipInputError, match="cannot be read"):
        build_cnn("alexnet", 10, garbage)
    with pytest.raises(DpvipInputError, match="does not exist"):
        build_cnn("alexnet", 10, tmp_path / "absent.pth")
    with pytest.raises(DpvipInputError, match="vgg16"):
        build_cnn("vgg16", 10)


def test_alexnet_refuses_images_smaller_than_it_can_take():
    train, _ = digits(32)
    with pytest.raises(DpvipInputError, match="at least 63 px"):
        cnn_finetune("alexnet", None, train.subset(range(4)), QUICK)


def test_a_short_resnet_fine_tune_with_auto_augment_runs(digits64):
    train, _ = digits64
    model = cnn_finetune("resnet50", None, train, replace(QUICK, auto_augment=True))
    assert not model.training and model.fc.out_features == 10


def test_the_grid_reports_every_lr_the_best_and_a_random_init(digits64):
    train, test = digits64
    result = cnn_finetune_grid("alexnet", None, train, test, QUICK, [1e-2, 1e-3])
    assert set(result["grid"]) == {1e-2, 1e-3} and all(0 <= accuracy <= 1 for accuracy in result["grid"].values())
    assert result["accuracy"] == max(result["grid"].values()) and result["lr"] == max(
        result["grid"], key=result["grid"].get
    )
    assert (result["arch"], result["init"], result["optimizer"], result["momentum"]) == (
        "alexnet",
        "random",
        "sgd",
        0.9,
    )


def test_the_image_size_check_reads_a_folder_without_decoding_it(tmp_path):
    """Paper scale: ImageNet-size sets are FolderImages, read on demand (no `images` tensor)."""
    from PIL import Image

    from dpvip.evaluate.cnn_baselines import check_image_size
    from dpvip.evaluate.datasets import FolderImages

    for label in ("a", "b"):
        (tmp_path / label).mkdir()
        Image.new("RGB", (40, 40)).save(tmp_path / label / "0.png")
    small, large = FolderImages(tmp_path, 32, name="small"), FolderImages(tmp_path, 64, name="large")
    with pytest.raises(DpvipInputError, match="alexnet needs images of at least 63 px, small has 32 px"):
        check_image_size("alexnet", small)
    check_image_size("alexnet", large)
