"""The clipper's per-layer rules (`dpvip.privacy.clipping` says what each computes and why):
for each watched layer, a function working out its per-example squared norms as its
backprops arrive (keeping in `_Call.parts` what the clipped sum needs) and one adding its
clipped sum; Linear layers and plain convolutions by ghost norms or formed per-example
gradients, every other layer type through opacus' grad samplers. Products run in the layer's
own precision, accumulating in float32; where that is reduced, each rule keeps the terms of
the clip bound (`dpvip.privacy.rounding`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from opacus.grad_sample import GradSampleModule
from torch import nn

from dpvip.privacy.fused_ghost import fused_ghost_runs_on, fused_ghost_tiles
from dpvip.privacy.rounding import SIXTEEN_BIT, ghost_bound, ghost_coefficients, round_down

CLIP_EPSILON = 1e-6  # opacus' guard against division by a zero norm
GRAM_BLOCK_TOKENS = 64  # about this many tokens per block of a ghost norm's Grams
FORMED_TOGETHER = 4096  # formed parts of at most this many elements an example share one buffer


def clip_factors(norms: torch.Tensor, clip_norm: float) -> torch.Tensor:
    """min(1, C / (norm + 1e-6)) per example."""
    return (clip_norm / (norms + CLIP_EPSILON)).clamp(max=1.0)


@dataclass
class _Call:
    """One layer's forward call: its input and its output's gradient edge, then its backprops."""

    activations: torch.Tensor | None
    output: torch.autograd.graph.GradientEdge | None  # not the tensor: that is freed as usual
    views: int = 1  # rows per example: an example's rows are consecutive
    backprops: torch.Tensor | None = None
    squared: list = field(default_factory=list)  # per-example squared norms, per parameter
    bounded: bool = False  # reduced-precision products: what the clip bound needs is kept
    ghost_bounds: list = field(default_factory=list)  # (S, e, r) per ghost-norm part (`rounding.ghost_bound`)
    fused: list = field(default_factory=list)  # (tiles, e, r) per fused ghost-norm part (`fused_ghost_tiles`)
    parts: dict = field(default_factory=dict)  # what the clipped sum needs, per parameter name


def _as_tokens(tensor: torch.Tensor, views: int = 1, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(examples, tokens, features) in `dtype`, whatever the leading shape; an example's
    `views` consecutive rows become one example with `views` times the tokens."""
    return tensor.reshape(tensor.shape[0] // views, -1, tensor.shape[-1]).to(dtype)


def _operand_dtype(backprops: torch.Tensor) -> torch.dtype:
    """The dtype the layer computed in: 16-bit under autocast (its backprops have it), else fp32."""
    return backprops.dtype if backprops.dtype in SIXTEEN_BIT else torch.float32


def _squares(per_example: torch.Tensor) -> torch.Tensor:
    """Per-example squared L2 norms, in one fused reduction (no squared temporary)."""
    flat = per_example.reshape(per_example.shape[0], -1)
    return torch.linalg.vector_norm(flat, dim=1).square()


@functools.cache
def sixteen_bit_products_to_float32(device: torch.device) -> bool:
    """Whether torch multiplies 16-bit matrices into float32 on `device` (`out_dtype`: CUDA in
    torch 2.8 and later), so that they stay 16-bit on tensor cores; else they are widened
    (their products are exact in float32 either way)."""
    if device.type != "cuda":
        return False
    try:
        x = torch.ones(1, 1, 1, dtype=torch.bfloat16, device=device)
        return torch.bmm(x, x, out_dtype=torch.float32).dtype == torch.float32
    except (TypeError, RuntimeError, NotImplementedError):
        return False


@functools.cache
def adds_sixteen_bit_products_in_place(device: torch.device) -> bool:
    """Whether torch adds 16-bit products into a float32 matrix in one kernel on `device`
    (`addmm(total, x, y, out_dtype=float32, out=total)`: CUDA, in the torch versions whose
    addmm takes a float32 `self` beside 16-bit operands). Tried once on a small case whose
    answer is known, so a torch that refuses it, or ignores `self`, keeps the product and
    the add apart."""
    if not sixteen_bit_products_to_float32(device):
        return False
    try:
        total = torch.full((2, 2), 0.5, device=device)
        ones = torch.ones(2, 3, dtype=torch.bfloat16, device=device)
        torch.addmm(total, ones, ones.T, out_dtype=torch.float32, out=total)
        return torch.equal(total, torch.full_like(total, 3.5))
    except (TypeError, RuntimeError, NotImplementedError):
        return False


def float32_bmm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x @ y in float32, accumulating in float32: 16-bit operands stay 16-bit where torch can
    (tensor cores) and are widened elsewhere."""
    if x.dtype not in SIXTEEN_BIT:
        return torch.bmm(x, y)
    if sixteen_bit_products_to_float32(x.device):
        return torch.bmm(x, y, out_dtype=torch.float32)
    return torch.bmm(x.float(), y.float())


def _add_float32_mm_(total: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> None:
    """total += x @ y (total float32), accumulating in float32 whatever the operands' dtype."""
    if x.dtype not in SIXTEEN_BIT:
        total.addmm_(x, y)
    elif adds_sixteen_bit_products_in_place(x.device):  # one launch, not a product and an add
        torch.addmm(total, x, y, out_dtype=torch.float32, out=total)
    elif sixteen_bit_products_to_float32(x.device):
        total.add_(torch.mm(x, y, out_dtype=torch.float32))
    else:
        total.addmm_(x.float(), y.float())


def ghost_squared_norms(a: torch.Tensor, g: torch.Tensor, wide: bool = False) -> torch.Tensor:
    """Per example, <A A^T, G G^T> = ||G^T A||^2 from (examples, tokens, features) A and G.

    Both Grams are symmetric, so with the tokens cut into k blocks only block row i from
    block column i on is formed, the part right of the diagonal block counted twice:
    (k + 1) / 2k of the T^2 entries. k is about T / GRAM_BLOCK_TOKENS: on 2 CPU threads, a
    ViP decoder layer (T = 197) in 3 blocks takes 20-25% less time than one full Gram, while
    blocks much under 50 tokens lose the saving to smaller matrix products.

    The Grams are float32 (16-bit operands on tensor cores, `float32_bmm`); with `wide`, their
    entrywise products (float32, rounded once) are summed in float64, as the bounded clip
    assumes. (16-bit operands on a GPU take one fused kernel instead: `_token_squared_norms`.)"""
    tokens = a.shape[1]
    blocks = _gram_blocks(a)
    batch = a.shape[0]
    if blocks == 1 and not wide:
        return torch.linalg.vecdot(
            float32_bmm(a, a.transpose(1, 2)).view(batch, -1), float32_bmm(g, g.transpose(1, 2)).view(batch, -1)
        )
    sums = torch.float64 if wide else a.dtype
    if blocks == 1:  # wide: the products rounded once in float32, summed in float64
        product = float32_bmm(a, a.transpose(1, 2))
        return product.mul_(float32_bmm(g, g.transpose(1, 2))).sum((1, 2), dtype=sums)
    size = -(-tokens // blocks)
    total = torch.zeros(batch, dtype=sums, device=a.device)
    for start in range(0, tokens, size):
        end = min(start + size, tokens)
        product = float32_bmm(a[:, start:end], a[:, start:].transpose(1, 2))
        product.mul_(float32_bmm(g[:, start:end], g[:, start:].transpose(1, 2)))
        total += product[:, :, : end - start].sum((1, 2), dtype=sums)  # the diagonal block: both halves in it
        if end < tokens:  # its mirror image is not formed
            total += 2 * product[:, :, end - start :].sum((1, 2), dtype=sums)
    return total


def _gram_blocks(a: torch.Tensor, device_type: str | None = None) -> int:
    """How many blocks a ghost norm cuts its tokens into: about T / GRAM_BLOCK_TOKENS, except
    float32 operands on CUDA, whose Grams run fastest whole (fewer launches). Measured on an
    H200 (ViP-Base, batch 512 in micro-batches of 256): fp32 1.20x -> 1.15x the non-private
    step whole. 16-bit operands on CUDA take the fused kernel where Triton is installed
    (`_token_squared_norms`); without it they stay in blocks, since torch 2.11 runs their
    float32-output batched products on a slow kernel whose time follows the products' size
    (whole: 2.0x, blocks: 1.55x). `device_type`: the device to choose for (default: a's)."""
    if (device_type or a.device.type) == "cuda" and a.dtype not in SIXTEEN_BIT:
        return 1
    return max(1, round(a.shape[1] / GRAM_BLOCK_TOKENS))


def _token_squared_norms(layer: nn.Module, a: torch.Tensor, g: torch.Tensor, call: _Call) -> list:
    """Squared norms of a layer whose weight gradient is G_i^T A_i over tokens (Linear, and
    Conv2d on unfolded patches); keeps what the clipped sum needs in `call.parts`."""
    tokens, fan_in, fan_out = a.shape[1], a.shape[2], g.shape[2]
    squared = []
    if layer.weight.requires_grad:
        if tokens * (fan_in + fan_out) < fan_in * fan_out:
            call.parts["weight"] = ("ghost", a, g)
            if a.dtype in SIXTEEN_BIT and fused_ghost_runs_on(a.device.type):
                # one kernel: the Grams' tiles never leave the chip, S from their diagonals; its
                # tile sums are summed with every fused layer's after the pass (`summed_tiles`)
                call.fused.append((fused_ghost_tiles(a, g), *ghost_coefficients(a, g)))
            else:
                squared.append(ghost_squared_norms(a, g, wide=call.bounded))
                if call.bounded:
                    call.ghost_bounds.append(ghost_bound(a, g))
        else:
            squared.append(_formed(call, "weight", float32_bmm(g.transpose(1, 2), a)))
    if layer.bias is not None and layer.bias.requires_grad:
        squared.append(_formed(call, "bias", g.sum(1, dtype=torch.float32)))
    return squared


def _formed(call: _Call, name: str, per_example: torch.Tensor) -> torch.Tensor | None:
    """Keeps a formed per-example gradient (float32) for the sum; its squared norms. Where
    bounded, None: the clipper takes every layer's formed parts together, their norms and
    their clipped sums in a few launches whatever their number (`FormedParts`)."""
    call.parts[name] = ("formed", per_example)
    return None if call.bounded else _squares(per_example)


class FormedParts:
    """The formed per-example gradients of one micro-batch's bounded layers. The small ones
    (at most FORMED_TOGETHER elements an example: LayerNorms, biases) side by side in one
    float32 buffer (examples, their sizes summed): their squared norms (float64) are one
    reduction and their clipped sums one matrix-vector product, added into the parameters'
    places of the clipper's flat sums in one indexed add, a few launches instead of two a
    part (about 140 parts a ViP-Base micro-batch). Larger ones (formed weights) stay where
    they are, summed by their layer's rule, so the buffer never doubles a large part's
    memory; only their norms are taken here."""

    def __init__(self, small: list[tuple[nn.Parameter, torch.Tensor]], places: torch.Tensor | None, large: list):
        self.matrix = torch.cat([grad.reshape(grad.shape[0], -1) for _, grad in small], 1) if small else None
        self.places, self.large = places, large  # each column's index in the flat sums; tensors

    def squared_norms(self) -> torch.Tensor:
        rows = ([self.matrix] if self.matrix is not None else []) + [g.reshape(g.shape[0], -1) for g in self.large]
        norms = [torch.linalg.vector_norm(row, dim=1, dtype=torch.float64) for row in rows]
        return torch.stack(norms).square_().sum(0)

    def add_clipped_sums(self, flat: torch.Tensor, factors: torch.Tensor) -> None:
        if self.matrix is not None:
            flat.index_add_(0, self.places, torch.mv(self.matrix.T, factors))


def _linear_squared_norms(layer: nn.Linear, call: _Call) -> list:
    dtype = _operand_dtype(call.backprops)
    a = _as_tokens(call.activations, call.views, dtype)
    return _token_squared_norms(layer, a, _as_tokens(call.backprops, call.views, dtype), call)


def _patches(layer: nn.Conv2d, images: torch.Tensor) -> torch.Tensor:
    """(examples, positions, in-channels x kernel positions), in the order of the weight's
    (in, kh, kw) flattening: F.unfold, or for a patch embedding (stride = kernel, no padding,
    no dilation, the image a whole number of patches) the same values by one reshaping copy,
    without im2col."""
    (kh, kw), (sh, sw) = layer.kernel_size, layer.stride
    batch, channels, height, width = images.shape
    patchify = (kh, kw) == (sh, sw) and layer.padding == (0, 0) and layer.dilation == (1, 1)
    if patchify and height % kh == 0 and width % kw == 0:
        grid = images.reshape(batch, channels, height // kh, kh, width // kw, kw)
        return grid.permute(0, 2, 4, 1, 3, 5).reshape(batch, (height // kh) * (width // kw), channels * kh * kw)
    return F.unfold(images, layer.kernel_size, layer.dilation, layer.padding, layer.stride).transpose(1, 2)


def _conv_squared_norms(layer: nn.Conv2d, call: _Call) -> list:
    """A convolution is a Linear layer on its input's patches: tokens are output positions
    (times the views), features the in-channels x kernel positions."""
    dtype = _operand_dtype(call.backprops)
    a = _as_tokens(_patches(layer, call.activations.to(dtype)), call.views, dtype)
    g = _as_tokens(call.backprops.flatten(2).transpose(1, 2), call.views, dtype)
    return _token_squared_norms(layer, a, g, call)


class _Factors:
    """One micro-batch's clip factors (float32), and in a 16-bit dtype rounded down (once per
    dtype): a 16-bit operand times them is then exact in float32 and rounds once."""

    def __init__(self, values: torch.Tensor):
        self.values, self._rounded = values, {}

    def of(self, dtype: torch.dtype) -> torch.Tensor:
        if dtype not in SIXTEEN_BIT:
            return self.values
        if dtype not in self._rounded:
            self._rounded[dtype] = round_down(self.values, dtype)
        return self._rounded[dtype]


def _linear_add_clipped_sum(layer: nn.Module, call: _Call, factors: _Factors, sums: dict) -> None:
    """Adds the layer's clipped sums into `sums[param]` (fp32, in place, no temporaries)."""
    for name, part in call.parts.items():
        total = sums[getattr(layer, name)]
        if part[0] == "ghost":
            a, g = part[1], part[2]
            # Scale the smaller operand, rounded once to its dtype (`dpvip.privacy.rounding`).
            if a.shape[2] < g.shape[2]:
                a = a * factors.of(a.dtype)[:, None, None]
            else:
                g = g * factors.of(g.dtype)[:, None, None]
            _add_float32_mm_(total.view(total.shape[0], -1), g.reshape(-1, g.shape[2]).T, a.reshape(-1, a.shape[2]))
        else:
            per_example = part[1]
            total.view(-1).addmv_(per_example.reshape(per_example.shape[0], -1).T, factors.values)


def _sampled_squared_norms(layer: nn.Module, call: _Call) -> torch.Tensor:
    """Per-example gradients from opacus' grad sampler for the layer's type."""
    sampler = GradSampleModule.GRAD_SAMPLERS[type(layer)]
    per_example = sampler(layer, [call.activations], call.backprops)
    # Per row, then summed over an example's views (the backprops already carry the 1 / K);
    # one view's sum is the row itself: no copy.
    grads = {
        param: grad.float() if call.views == 1 else grad.float().unflatten(0, (-1, call.views)).sum(1)
        for param, grad in per_example.items()
    }
    return [_formed(call, param, grad) for param, grad in grads.items()]


def _sampled_add_clipped_sum(layer: nn.Module, call: _Call, factors: _Factors, sums: dict) -> None:
    for param, (_, grad) in call.parts.items():
        sums[param].view(-1).addmv_(grad.reshape(grad.shape[0], -1).T, factors.values)


def _plain_conv(layer: nn.Module) -> bool:
    return (
        type(layer) is nn.Conv2d
        and layer.groups == 1
        and layer.padding_mode == "zeros"
        and not isinstance(layer.padding, str)
    )


def _rules(layer: nn.Module):
    if isinstance(layer, nn.Linear):
        return _linear_squared_norms, _linear_add_clipped_sum
    if _plain_conv(layer):
        return _conv_squared_norms, _linear_add_clipped_sum
    return _sampled_squared_norms, _sampled_add_clipped_sum
