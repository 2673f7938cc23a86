"""Our MAE checkpoint as detectron2's ViTDet backbone: every encoder tensor under exactly one
detectron2 ViT name with its shape, the decoder left out, the key set as detectron2 names it."""

import pytest
import torch

from dpvip.errors import DpvipInputError
from dpvip.evaluate.detectron2_convert import convert_checkpoint, detectron2_key, detectron2_state_dict
from dpvip.models import MAESettings
from dpvip.models.checkpoint import save_mae
from dpvip.models.mae import MaskedAutoencoder

pytestmark = pytest.mark.usefixtures("torch_one_thread")

DROPPED_BY_VITDET = ("cls_token.weight", "norm.weight", "norm.bias")  # detectron2's ViT has neither


def vitdet_shapes(depth: int, width: int, patch: int, grid: int, mlp: int) -> dict[str, tuple[int, ...]]:
    """detectron2's ViT (modeling/backbone/vit.py) inside SimpleFeaturePyramid as `net`,
    written out from its naming: PatchEmbed.proj, pos_embed with the class slot, and per
    block norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2."""
    shapes = {
        "backbone.net.patch_embed.proj.weight": (width, 3, patch, patch),
        "backbone.net.patch_embed.proj.bias": (width,),
        "backbone.net.pos_embed": (1, 1 + grid * grid, width),
    }
    for i in range(depth):
        block = f"backbone.net.blocks.{i}"
        shapes |= {
            f"{block}.norm1.weight": (width,), f"{block}.norm1.bias": (width,),
            f"{block}.attn.qkv.weight": (3 * width, width), f"{block}.attn.qkv.bias": (3 * width,),
            f"{block}.attn.proj.weight": (width, width), f"{block}.attn.proj.bias": (width,),
            f"{block}.norm2.weight": (width,), f"{block}.norm2.bias": (width,),
            f"{block}.mlp.fc1.weight": (mlp, width), f"{block}.mlp.fc1.bias": (mlp,),
            f"{block}.mlp.fc2.weight": (width, mlp), f"{block}.mlp.fc2.bias": (width,),
        }  # fmt: skip
    return shapes


@pytest.mark.parametrize("size, depth, width", [("pico", 2, 64), ("micro", 4, 96)])
def test_every_encoder_tensor_has_exactly_one_detectron2_name_of_its_shape(size, depth, width):
    torch.manual_seed(0)
    mae = MaskedAutoencoder(MAESettings(size, image_size=32, patch_size=4))
    converted = detectron2_state_dict(mae)
    expected = vitdet_shapes(depth, width, patch=4, grid=8, mlp=4 * width)
    assert set(converted) == set(expected)
    assert {key: tuple(tensor.shape) for key, tensor in converted.items()} == expected

    ours = mae.state_dict()
    encoder = [
        name for name in ours if not name.startswith(("decoder", "mask_token")) and name not in DROPPED_BY_VITDET
    ]
    targets = [detectron2_key(name) for name in encoder]
    assert len(set(targets)) == len(encoder) and set(targets) == set(expected) - {"backbone.net.pos_embed"}
    for name, key in zip(encoder, targets):
        assert torch.equal(converted[key], ours[name])
    decoder = [name for name in ours if name.startswith(("decoder", "mask_token"))]
    assert decoder and all(detectron2_key(name) is None for name in decoder)
    assert not any("decoder" in key or "mask_token" in key or "cls_token" in key for key in converted)
    assert torch.equal(converted["backbone.net.pos_embed"], mae.pos_embed)
    assert torch.count_nonzero(converted["backbone.net.pos_embed"][0, 0]) == 0  # the class slot


def test_an_unknown_encoder_tensor_is_refused_rather_than_dropped():
    with pytest.raises(DpvipInputError, match="blocks.0.ls1.gamma"):
        detectron2_key("blocks.0.ls1.gamma")


def test_the_checkpoint_file_is_what_detection_checkpointer_loads(tmp_path):
    torch.manual_seed(0)
    mae = MaskedAutoencoder(MAESettings("pico", image_size=48, patch_size=8))
    save_mae(mae, tmp_path / "mae.pt", {"stage": "test"})
    summary = convert_checkpoint(tmp_path / "mae.pt", tmp_path / "vitdet.pth")
    payload = torch.load(tmp_path / "vitdet.pth", map_location="cpu", weights_only=True)
    assert payload["__author__"] == "dpvip" and payload["matching_heuristics"] is True
    assert payload["model"]["backbone.net.pos_embed"].shape == (1, 1 + 6 * 6, 64)  # at the checkpoint's 48 px
    assert set(payload["model"]) == set(vitdet_shapes(2, 64, patch=8, grid=6, mlp=256))
    assert summary["vit"] == {
        "embed_dim": 64,
        "depth": 2,
        "num_heads": 2,
        "mlp_ratio": 4.0,
        "patch_size": 8,
        "pretrain_img_size": 48,
        "pretrain_use_cls_token": True,
    }
    assert (
        "cls_token.weight" in summary["dropped"]
        and "decoder_pred.weight" in summary["dropped"]
        and summary["tensors"] == len(payload["model"])
    )
