"""FLOPs of one computation, counted by `torch.utils.flop_counter.FlopCounterMode`.

The counter counts what dominates a GPU's time: matrix products, convolutions and attention
(2 FLOPs per multiply-add), not element-wise work (norms, activations, optimizers, noise).
Networks are built on the `meta` device, where tensors have shapes but no storage, so a
ViT-L at 224 px or a ViTDet at 1024 px is counted in well under a second. A DP step is
counted on the CPU with a batch of one: the clipping switches autocast off for its device,
which the meta device does not support.

Three kinds of operator are not in torch's formula table and are given torch's own formulas
through the counter's public `custom_mapping`: the in-place products of the DP clipping,
`addmm_` (the clipped sum (c G)^T A of a layer) and `addmv_` (the weighted sum of formed
per-example gradients); and the CPU's fused attention (forward and backward), which the
meta device decomposes into counted matrix products but the CPU runs as one kernel.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

aten = torch.ops.aten
META = torch.device("meta")
CPU = torch.device("cpu")


def _addmm_flop(self_shape, a_shape, b_shape, *args, **kwargs) -> int:
    """torch's formula for addmm (2 m k n), for the in-place addmm_."""
    (rows, inner), (_, columns) = a_shape, b_shape
    return 2 * rows * inner * columns


def _mv_flop(matrix_shape, vector_shape, *args, **kwargs) -> int:
    rows, columns = matrix_shape
    return 2 * rows * columns


def _addmv_flop(self_shape, matrix_shape, vector_shape, *args, **kwargs) -> int:
    return _mv_flop(matrix_shape, vector_shape)


def _cpu_attention_flop(query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_attention_backward_flop(grad_out_shape, query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


UNLISTED_FORMULAS = {
    aten.addmm_: _addmm_flop,
    aten.mv: _mv_flop,
    aten.addmv: _addmv_flop,
    aten.addmv_: _addmv_flop,
    aten._scaled_dot_product_flash_attention_for_cpu: _cpu_attention_flop,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_attention_backward_flop,
}


def count_flops(compute: Callable[[], object]) -> int:
    """FLOPs of everything `compute()` runs (its forward and any backward it calls)."""
    with FlopCounterMode(display=False, custom_mapping=UNLISTED_FORMULAS) as counter:
        compute()
    return int(counter.get_total_flops())


def per_example_losses(outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(outputs, labels, reduction="none")


def images_on(device: torch.device, batch: int, image_size: int, channels: int = 3) -> torch.Tensor:
    return torch.zeros(batch, channels, image_size, image_size, device=device)


def labels_on(device: torch.device, batch: int) -> torch.Tensor:
    return torch.zeros(batch, dtype=torch.long, device=device)


def forward_flops(network: torch.nn.Module, inputs: torch.Tensor) -> int:
    """One forward pass without gradients (feature extraction, evaluation)."""

    def run():
        with torch.no_grad():
            network(inputs)

    return count_flops(run)


def training_flops(loss: Callable[[], torch.Tensor]) -> int:
    """One forward and backward pass of the summed `loss()` (a non-private step)."""
    return count_flops(lambda: loss().sum().backward())


def dp_training_flops(network: torch.nn.Module, losses: Callable[[], torch.Tensor], views: int = 1) -> int:
    """One DP micro-batch as the training code runs it: forward, backward to the layer outputs,
    per-example norms and the clipped sum (`dpvip.privacy.clipping.ClippedGradientSum`)."""
    from dpvip.privacy.clipping import ClippedGradientSum

    clipper = ClippedGradientSum(network, clip_norm=1.0, views=views)
    try:
        return count_flops(lambda: clipper.add(losses))
    finally:
        clipper.close()
