"""Model families, with sizes as data.

`MAE_SIZES` is the registry of masked-autoencoder sizes: ViP Table 3 (nano ... large, patch
16 on 224 px images) and small CPU sizes for the embedded default; `WRN_SIZES` the wide
ResNets of DP-RandP. It imports nothing heavy, so configuration checks can use it;
`dpvip.models.mae` and `dpvip.models.wrn` build the networks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from dpvip.errors import DpvipInputError


@dataclass(frozen=True)
class MAESize:
    """Widths and depths of an MAE; patch size and image size are settings of the run."""

    encoder_width: int
    encoder_depth: int
    encoder_heads: int
    decoder_width: int = 512
    decoder_depth: int = 4
    decoder_heads: int = 16
    mlp_ratio: float = 4.0
    paper_parameters: float | None = None  # millions, as ViP Table 3 prints them

    def architecture(self) -> dict:
        """The fields that shape the network (what a checkpoint must match)."""
        fields = asdict(self)
        fields.pop("paper_parameters")
        return fields


# ViP Table 3: encoder width 192/384/576/768/1024, depth 12 (24 for large), decoder 512 wide
# with 4 blocks; heads keep the width per head at 64 as in ViT. The authors' names do not
# follow timm's (their "tiny" is timm's ViT-S width).
MAE_SIZES = {
    "nano": MAESize(192, 12, 3, paper_parameters=18.6),
    "tiny": MAESize(384, 12, 6, paper_parameters=34.8),
    "small": MAESize(576, 12, 9, paper_parameters=61.6),
    "base": MAESize(768, 12, 12, paper_parameters=99.0),
    "large": MAESize(1024, 24, 16, paper_parameters=233.3),
    # CPU sizes for the embedded default (32 px images, patch 4).
    "pico": MAESize(64, 2, 2, decoder_width=32, decoder_depth=1, decoder_heads=2),
    "micro": MAESize(96, 4, 3, decoder_width=64, decoder_depth=2, decoder_heads=4),
    "mini": MAESize(192, 6, 3, decoder_width=128, decoder_depth=2, decoder_heads=4),
}


# Wide ResNets (DP-RandP): `dpvip.models.wrn` builds them.
@dataclass(frozen=True)
class WRNSize:
    depth: int
    widen: int

    @property
    def blocks_per_stage(self) -> int:
        return (self.depth - 4) // 6

    @property
    def widths(self) -> tuple[int, int, int, int]:
        """Stem, then the three stages."""
        return 16, 16 * self.widen, 32 * self.widen, 64 * self.widen


WRN_SIZES = {
    "wrn10_1": WRNSize(10, 1),  # CPU size (embedded default): 77,850 parameters
    "wrn16_1": WRNSize(16, 1),  # CPU size, deeper: the embedded stand-in for WRN-40-4
    "wrn16_4": WRNSize(16, 4),  # DP-RandP's main network
    "wrn40_4": WRNSize(40, 4),  # DP-RandP Table 12
}


def wrn_size(name: str) -> WRNSize:
    if name not in WRN_SIZES:
        raise DpvipInputError(f"WRN size '{name}' is not registered (known: {', '.join(WRN_SIZES)})")
    return WRN_SIZES[name]


def count_parameters(model) -> int:
    """Trainable parameters (the fixed position embeddings are buffers and not counted)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def mae_variant(name: str) -> tuple[str, int | None]:
    """A model name of the workflow: a size ('base') or a size with another decoder depth
    ('base_dec8', ViP Table 11) -> (size, decoder depth or None)."""
    size, _, depth = name.partition("_dec")
    if size not in MAE_SIZES or (depth and not depth.isdigit()) or (_ and not depth):
        raise DpvipInputError(
            f"MAE model '{name}' is not a registered size or <size>_dec<depth> (sizes: {', '.join(MAE_SIZES)})"
        )
    return size, int(depth) if depth else None


def mae_size(name: str, decoder_depth: int | None = None) -> MAESize:
    """The registered size `name`, with the decoder depth replaced if given (ViP Table 11)."""
    if name not in MAE_SIZES:
        raise DpvipInputError(f"MAE size '{name}' is not registered (known: {', '.join(MAE_SIZES)})")
    size = MAE_SIZES[name]
    if decoder_depth is None or decoder_depth == size.decoder_depth:
        return size
    if decoder_depth < 1:
        raise DpvipInputError(f"MAE decoder depth must be at least 1, not {decoder_depth}")
    return MAESize(**(size.architecture() | {"decoder_depth": decoder_depth}))


def _block_parameters(width: int, mlp_ratio: float) -> int:
    """A pre-norm ViT block with qkv bias: two LayerNorms, attention (qkv, projection), MLP."""
    hidden = int(width * mlp_ratio)
    return (
        2 * 2 * width
        + (3 * width * width + 3 * width)
        + (width * width + width)
        + (2 * width * hidden + hidden + width)
    )


def mae_parameters(model: str, patch_size: int = 16, in_chans: int = 3) -> int:
    """Trainable parameters of the MAE `model` (a size or <size>_dec<depth>), counted from the
    registry without building it, so tables need no torch; `dpvip.models.mae` is tested to
    agree. Position embeddings are fixed buffers; the image size does not enter."""
    size = mae_size(*mae_variant(model))
    width, dec_width, pixels = size.encoder_width, size.decoder_width, patch_size * patch_size * in_chans
    encoder = (
        (pixels * width + width) + width + size.encoder_depth * _block_parameters(width, size.mlp_ratio) + 2 * width
    )
    decoder = (
        (width * dec_width + dec_width)
        + dec_width
        + size.decoder_depth * _block_parameters(dec_width, size.mlp_ratio)
        + 2 * dec_width
        + (dec_width * pixels + pixels)
    )
    return encoder + decoder


@dataclass(frozen=True)
class MAESettings:
    """Everything that defines an MAE network and its loss (stored in every checkpoint)."""

    size: str
    image_size: int = 224
    patch_size: int = 16
    mask_ratio: float = 0.75
    norm_pix_loss: bool = True
    decoder_depth: int | None = None  # None: the size's default

    def check(self) -> None:
        mae_size(self.size, self.decoder_depth)
        if self.image_size % self.patch_size:
            raise DpvipInputError(f"MAE image size {self.image_size} is not a multiple of patch size {self.patch_size}")
        if not 0 <= self.mask_ratio < 1:
            raise DpvipInputError(f"MAE mask ratio must be in [0, 1), not {self.mask_ratio}")
