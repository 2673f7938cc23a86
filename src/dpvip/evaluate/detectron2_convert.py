"""An MAE checkpoint of ours as a detectron2 ViTDet backbone checkpoint (ViP Table 4 at
paper scale, where detectron2's `mask_rcnn_vitdet_b_100ep` config does the fine-tuning).

detectron2 names relied on (`detectron2/modeling/backbone/vit.py`; the config
`configs/common/models/mask_rcnn_vitdet.py` puts the `ViT` inside `SimpleFeaturePyramid`
as `net`, and the pyramid is the model's `backbone`):
- `backbone.net.patch_embed.proj.{weight,bias}`: the patch embedding's Conv2d `proj`;
- `backbone.net.pos_embed`: a (1, 1 + (pretrain_img_size / patch)^2, width) table when
  `pretrain_use_cls_token=True` (the default), whose first row is the class slot that
  `get_abs_pos` drops before interpolating the rest to the detection grid;
- `backbone.net.blocks.{i}.norm1`, `.attn.qkv`, `.attn.proj`, `.norm2`, `.mlp.fc1`,
  `.mlp.fc2` (each `.weight` and `.bias`): timm's Block names, which ours share.
detectron2's ViT has no class token and no final norm, so ours are dropped, as are the
decoder and the mask token. ViTDet's relative position tables (`attn.rel_pos_h/w`) are not
pre-trained: detectron2 zero-initialises them, as when it loads MAE's own checkpoints.
Our position embeddings are a fixed sin-cos buffer, not saved with the weights; they are
written from the buffer of the network rebuilt at the checkpoint's image size.

The file is `{"model": weights, "__author__": "dpvip", "matching_heuristics": True}`, which
`DetectionCheckpointer` loads by name matching. In the detectron2 config set
`model.backbone.net.pretrain_img_size` to the checkpoint's image size (224 for ViP) and
`embed_dim`, `depth`, `num_heads`, `patch_size` to the encoder's (`convert_checkpoint`
returns them).
"""

from __future__ import annotations

from pathlib import Path

import torch

from dpvip.errors import DpvipInputError
from dpvip.files import atomic_target, writable_target
from dpvip.models.checkpoint import load_mae
from dpvip.models.mae import MaskedAutoencoder

PREFIX = "backbone.net."
BLOCK_TENSORS = tuple(
    f"{part}.{kind}"
    for part in ("norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2")
    for kind in ("weight", "bias")
)
NOT_IN_VITDET = ("cls_token.", "norm.", "decoder_", "mask_token.")  # class token, final norm, decoder


def detectron2_key(name: str) -> str | None:
    """detectron2's name for the tensor `name` of our MAE's state dict; None for a tensor
    ViTDet has no place for. An encoder tensor of unknown name is an error, so a change of
    timm's block layout cannot drop weights silently."""
    if name.startswith(NOT_IN_VITDET):
        return None
    if name in ("patch_embed.proj.weight", "patch_embed.proj.bias"):
        return PREFIX + name
    block, _, rest = name.partition(".")[2].partition(".")
    if name.startswith("blocks.") and block.isdigit() and rest in BLOCK_TENSORS:
        return PREFIX + name
    raise DpvipInputError(f"MAE tensor '{name}' has no known detectron2 ViT name")


def detectron2_state_dict(mae: MaskedAutoencoder) -> dict[str, torch.Tensor]:
    """The encoder's weights under detectron2's ViT names, with `pos_embed` (class slot first)."""
    state = {}
    for name, tensor in mae.state_dict().items():
        key = detectron2_key(name)
        if key is not None:
            state[key] = tensor.detach().cpu().clone()
    state[PREFIX + "pos_embed"] = mae.pos_embed.detach().cpu().clone()
    return state


def convert_checkpoint(mae_checkpoint: str | Path, out: str | Path) -> dict:
    """Write `mae_checkpoint`'s encoder as a detectron2 checkpoint at `out` (.pth); returns
    what the detectron2 config must match (the ViT's shape and pre-training image size)."""
    mae, _ = load_mae(mae_checkpoint)
    state = detectron2_state_dict(mae)
    with atomic_target(writable_target(out)) as partial:
        torch.save({"model": state, "__author__": "dpvip", "matching_heuristics": True}, partial)
    return {
        "checkpoint": str(mae_checkpoint),
        "out": str(out),
        "tensors": len(state),
        "dropped": sorted(name for name in mae.state_dict() if detectron2_key(name) is None),
        "vit": {
            "embed_dim": mae.size.encoder_width,
            "depth": mae.size.encoder_depth,
            "num_heads": mae.size.encoder_heads,
            "mlp_ratio": mae.size.mlp_ratio,
            "patch_size": mae.patch_size,
            "pretrain_img_size": mae.settings.image_size,
            "pretrain_use_cls_token": True,
        },
    }
