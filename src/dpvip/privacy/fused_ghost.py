"""The ghost norm on a GPU as one fused kernel (Triton, `dpvip.privacy.gram_kernel`): per
example, <A A^T, G G^T> = sum over token pairs (s, t) of (a_s . a_t)(g_s . g_t), the two
Grams' tiles multiplied and summed where they are computed, never written to memory.

Each program takes one example and one tile (block row i, block column j >= i) of both
Grams: their entries are 16-bit (or float32) products accumulated in float32 on tensor cores
(`tl.dot`), their entrywise products exact in float64 (24 + 24 significant bits), summed
in float64, tiles right of the diagonal counted twice (both Grams are symmetric). That is
the arithmetic `dpvip.privacy.rounding`'s item 1 bounds: the Gram entries' accumulation
(gamma of the fan-in or fan-out, doubled unit), then a float64 sum. Zero padding of the
last tile adds exact zeros (x + 0 = x), and doubling a partial sum is exact, so the sum
has at most T^2 rounded terms, as the bound counts. Where this runs, the batched matrix
products of `layer_rules.ghost_squared_norms` and their float32 results are not formed:
on an H200, torch 2.11's cuBLAS ran those (float32-output bf16 products) on a Turing-era
kernel, 25 ms of a 168 ms ViP-Base DP step.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import torch

SMALLEST_TILE = 32  # the least BLOCK_T of `gram_kernel.CONFIGS`: `out` has room for its tiles


@functools.cache
def fused_ghost_runs_on(device_type: str) -> bool:
    """Whether the fused kernel runs on `device_type`: a CUDA GPU with bf16 tensor cores
    (compute capability 8.0 and later, where Triton's `tl.dot` takes bf16) and Triton
    installed, and CPU under Triton's interpreter (TRITON_INTERPRET=1, which the tests use).
    Elsewhere the clipper keeps its batched matrix products."""
    if importlib.util.find_spec("triton") is None:
        return False
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)
    return device_type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"


def fused_ghost_tiles(a: torch.Tensor, g: torch.Tensor, kernel=None, **tiles) -> torch.Tensor:
    """The kernel's output for (examples, tokens, features) A and G of one dtype (any strides):
    per example, float64 slots (examples, 2, slots), part 0 summing to <A A^T, G G^T> and part
    1 to S = sum_t ||a_t|| ||g_t|| (`fused_ghost_squared_norms` sums them; the clipper sums
    every layer's at once, `summed_tiles`). Every slot is written by the launch that counts:
    none is left from the tuner's timed launches. `kernel`: by default, on a GPU, the one that
    times its tile shapes on first use of each layer shape; the tests pass
    `gram_kernel.ghost_norm_tiles` with `tiles` (BLOCK_T, BLOCK_K) to run one tile shape in the
    interpreter."""
    if a.dtype != g.dtype or a.shape[:2] != g.shape[:2]:
        raise ValueError(f"ghost norm operands differ: {tuple(a.shape)} {a.dtype} and {tuple(g.shape)} {g.dtype}")
    if kernel is None:
        from dpvip.privacy import gram_kernel  # Triton: only where this runs

        # on CPU (the interpreter) there is no device to time: the first tile shape
        kernel, tiles = (
            (gram_kernel.ghost_norm_tuned, {})
            if a.is_cuda
            else (gram_kernel.ghost_norm_tiles, gram_kernel.CONFIGS[0].kwargs)
        )
    batch, tokens, fan_in = a.shape
    if not (batch and tokens):
        return torch.zeros(batch, 2, 1, dtype=torch.float64, device=a.device)
    most = -(-tokens // SMALLEST_TILE)
    # not zeroed: the launch writes every slot of its grid, and only those are read
    out = torch.empty(batch, 2, most * most, dtype=torch.float64, device=a.device)
    launched = []

    def grid(meta: dict) -> tuple[int, int, int]:
        # called for each launch (the tuner's timed ones first): the last is the one that counts
        launched.append(-(-tokens // meta["BLOCK_T"]))
        return batch, launched[-1], launched[-1]

    wide = a.dtype == torch.float32 or a.device.type == "cpu"  # IEEE float32 products; the interpreter
    kernel[grid](a, g, out, tokens, fan_in, g.shape[2], *a.stride(), *g.stride(), *out.stride()[:2], WIDE=wide, **tiles)
    return out[:, :, : launched[-1] ** 2]


def fused_ghost_squared_norms(
    a: torch.Tensor, g: torch.Tensor, kernel=None, **tiles
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per example (float64), <A A^T, G G^T> and S = sum_t ||a_t|| ||g_t|| from the Grams'
    diagonals, from (examples, tokens, features) A and G of one dtype (any strides). The
    diagonals are float32 sums of squares, so each is at least (1 - gamma_n) times its exact
    value (n the fan-in or fan-out, all terms positive); the coefficients of
    `rounding.ghost_coefficients` enlarge S by at least that much. `kernel`, `tiles`: as
    `fused_ghost_tiles`."""
    return fused_ghost_tiles(a, g, kernel, **tiles).sum(2).unbind(1)


def summed_tiles(slots: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """From several layers' `fused_ghost_tiles` of the same examples: (their squared norms
    summed over the layers, per example; S per layer, (layers, examples)), float64, in three
    operations whatever the number of layers (one per layer otherwise)."""
    counts = tuple(part.shape[2] for part in slots)
    together = torch.cat(slots, 2)
    return together[:, 0].sum(1), (together[:, 1] @ _layer_indicator(counts, together.device)).T


@functools.lru_cache(maxsize=64)
def _layer_indicator(counts: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """(slots, layers) float64: 1 where the slot is the layer's (`counts`: slots per layer, in order)."""
    layer_of_slot = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts))
    return torch.nn.functional.one_hot(layer_of_slot, len(counts)).double().to(device)
