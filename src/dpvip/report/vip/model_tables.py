"""ViP Table 3 (MAE sizes and parameter counts), counted from our registry beside the paper."""

from __future__ import annotations

import pandas as pd

from dpvip.models import MAE_SIZES, MAESettings, mae_parameters, mae_variant
from dpvip.report.common.paper_values import paper_table


def trainable_millions(model: str, image_size: int = 224, patch_size: int = 16) -> float:
    size, decoder_depth = mae_variant(model)
    MAESettings(size, image_size, patch_size, decoder_depth=decoder_depth).check()
    return mae_parameters(model, patch_size) / 1e6


def vip_table3(values: pd.DataFrame, extra_models: dict[str, tuple[int, int]]) -> pd.DataFrame:
    """One row per ViP Table 3 size (224 px, patch 16), then `extra_models`
    {name: (image size, patch size)} that the run uses beyond the paper's sizes."""
    printed = paper_table(values, "vip", "table3")
    rows = []
    for row, paper in printed.iterrows():
        name = row.removeprefix("ViP-").lower()
        rows.append(_row(name, 224, 16, paper["# parameters"]))
    for name, (image_size, patch_size) in extra_models.items():
        if name not in [r["model"] for r in rows]:
            rows.append(_row(name, image_size, patch_size, None))
    return pd.DataFrame(rows)


def _row(name: str, image_size: int, patch_size: int, paper_millions: float | None) -> dict:
    size_name, decoder_depth = mae_variant(name)
    size = MAE_SIZES[size_name]
    ours = trainable_millions(name, image_size, patch_size)
    return {
        "model": name,
        "input": f"{image_size} px / patch {patch_size}",
        "encoder depth": size.encoder_depth,
        "encoder width": size.encoder_width,
        "decoder depth": decoder_depth or size.decoder_depth,
        "decoder width": size.decoder_width,
        "parameters (M)": round(ours, 2),
        "paper parameters (M)": paper_millions,
        "difference (%)": None if paper_millions is None else round(100 * (ours / paper_millions - 1), 2),
    }


NOTES = [
    "Trainable parameters of our MAE built from the registry (dpvip.models.MAE_SIZES); the fixed "
    "sin-cos position embeddings are buffers and not counted.",
    "Large: ViP prints 24 blocks of width 1024 and 233.3M parameters; that architecture (ViT-L, as "
    "in He et al.) has 316.6M (its encoder alone 303M). We follow the printed architecture; 233M "
    "is also the paper's LAION subset size, a likely slip.",
    "Rows without a paper value are the embedded default's CPU sizes.",
]
