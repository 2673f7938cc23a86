"""A proven bound on what rounding can add to an example's clipped contribution, for the
clipper's products in reduced precision (bf16 tensor cores under autocast, or TF32 / bf16
for float32 matrix products where torch allows them).

Notation, for one example and one layer whose weight gradient is W = sum_t g_t a_t^T over
its T tokens (a_t: the layer's input as the layer used it, g_t: its output's backprop):
alpha_t = ||a_t||, beta_t = ||g_t||, S = sum_t alpha_t beta_t (so ||W|| <= S). Model of the
arithmetic (the standard one, Higham's "Accuracy and Stability of Numerical Algorithms" ch. 2
-3, with a doubled unit for accumulators that truncate, as tensor cores were found to do by
Fasi et al. 2021, "Numerical behavior of NVIDIA tensor cores"):

- a product of two bf16 (or fp16) numbers is exact in float32 (8 + 8 significant bits <= 24);
  a product of float32 operands errs by at most `product_error` relative (2^-24 in IEEE,
  about 2^-10 where TF32 rounds both operands to 11 bits, 2^-7 for bf16);
- a float32 sum of n such products errs by at most gamma_n sum |x_k y_k|, gamma_n =
  n u / (1 - n u), u = 2^-23 (twice float32's unit roundoff, covering truncation); in float64,
  u = 2^-53.

Then, per example:

1. The ghost norm N^2 = <fl(A A^T), fl(G G^T)> (Grams in float32, their entrywise products
   rounded once in float32, summed in float64) differs from ||W||^2 by at most eps S^2, eps =
   (1 + g_in)(1 + g_out)(1 + 2^-24)(1 + gamma64_{T^2+1}) - 1, g_n = (1 + product_error)(1 +
   gamma_n) - 1: each Gram entry errs by at most g_n ||a_s|| ||a_t|| (Cauchy-Schwarz), and
   sum_{s,t} alpha_s alpha_t beta_s beta_t = S^2. S itself is summed in float32 and enlarged
   by its own rounding bound, so it is never below the true S. On a GPU, 16-bit operands
   take one fused kernel (`dpvip.privacy.fused_ghost`): the same float32 Gram entries, their
   products exact in float64 (so the 2^-24 above is slack), and S from the Grams' diagonals
   (float32 sums of squares, each at least (1 - g_n) of its value; roots and sums in
   float64), within the same enlargement. There the tile sums of every layer are summed in
   one float64 sum: N terms (N the tiles of all layers) err by at most gamma64_N times the
   sum of their magnitudes, itself at most the sum of the layers' S^2, which the 2^-24 left
   over covers while N < 2^28.
2. The clipped sum multiplies the rounded scaled operand fl(c g_t) (or fl(c a_t)) by the other
   one: the example's share differs from c W by at most r = c S ((1 + u_scale)(1 +
   product_error)(1 + gamma_T) - 1) in Frobenius norm (triangle inequality over tokens), with
   u_scale the one rounding of the scaled operand to its dtype (2^-8 for bf16: the factor is
   first rounded down to bf16, `round_down`, so that c times a bf16 value is exact in float32
   and rounds once).
3. A layer whose per-example gradient F is formed (biases, LayerNorm, small Linear layers)
   adds c F: its squared norm is summed in float64, and the product c F rounds by 2^-24:
   r = 2^-23 c ||F|| covers both.

Over the layers, the share M of an example satisfies ||M|| <= c (sqrt(sum N^2 + sum eps S^2) +
sqrt(sum r^2)) (Minkowski), so the clip factor c = min(1, C / bound) keeps ||M|| <= C as the
rounded operands give it. What this leaves out, as every floating-point DP library does: the
summation over examples in the clipped sums' matrix products (relative 2^-23 per addition of
the running sum, whatever the clip), and the noise's own rounding.

In full float32 ('highest' matrix precision, no autocast) the clipper keeps opacus' factor
min(1, C / (N + 1e-6)): its rounding is of order 2^-24 S, four orders below bf16's, and every
seeded run there stays bit-identical.
"""

from __future__ import annotations

import functools

import torch

ACCUMULATION_UNIT = 2.0**-23  # float32 accumulation, doubled for truncating tensor cores
FLOAT64_UNIT = 2.0**-53
FACTOR_MARGIN = 2.0**-20  # the clip factor's own rounding to float32, with room to spare
FORMED_ROUNDING = 2.0**-23  # c F in float32 plus the float64 norm of F, relative to ||F||
SIXTEEN_BIT = (torch.bfloat16, torch.float16)
_UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}
_FP32_PRODUCTS = {"highest": 2.0**-24, "high": 2 * 2.0**-11 + 2.0**-22, "medium": 2 * 2.0**-8 + 2.0**-16}


def gamma(n: int | torch.Tensor, unit: float = ACCUMULATION_UNIT):
    """Higham's gamma_n = n u / (1 - n u): the relative error bound of an n-term sum."""
    return n * unit / (1 - n * unit)


def fp32_matmul_precision(device_type: str) -> str:
    """How torch runs float32 matrix products on `device_type`: 'highest' (IEEE float32),
    'high' (TF32 on CUDA) or 'medium' (bf16)."""
    precision = torch.get_float32_matmul_precision()
    if device_type == "cuda" and precision == "highest":
        matmul = torch.backends.cuda.matmul
        if matmul.allow_tf32 or getattr(matmul, "fp32_precision", "none") == "tf32":
            return "high"
    return precision


def product_error(dtype: torch.dtype, device_type: str) -> float:
    """Relative error of one product of two operands of `dtype` inside a matrix product
    accumulating in float32 (0 for 16-bit operands: their products are exact in float32)."""
    if dtype in SIXTEEN_BIT:
        return 0.0
    return _FP32_PRODUCTS[fp32_matmul_precision(device_type)]


def reduced_precision(dtype: torch.dtype, device_type: str) -> bool:
    """Whether products of `dtype` operands round more than IEEE float32 does."""
    return dtype in SIXTEEN_BIT or fp32_matmul_precision(device_type) != "highest"


def token_norm_sum(a: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(sum_t ||a_t|| ||g_t|| per example, summed in float32, and the factor (1 / the least
    (1 - gamma) its roundings allow) that makes it an upper bound on the true S), from
    (examples, tokens, features)."""
    alpha = torch.linalg.vector_norm(a, dim=2, dtype=torch.float32)
    beta = torch.linalg.vector_norm(g, dim=2, dtype=torch.float32)
    return torch.linalg.vecdot(alpha, beta), token_norm_sum_margin(a, g)


def token_norm_sum_margin(a: torch.Tensor, g: torch.Tensor) -> float:
    """1 / (1 - gamma_{in+1})(1 - gamma_{out+1})(1 - gamma_{T+1}) (float32 units, doubled):
    S summed in float32 times this is never below the exact S. It also covers S from float32
    sums of squares whose square roots, products and sum are float64 (the fused ghost norm):
    there each ||a_t||^2 is at least (1 - gamma_in) of its value, so its root at least
    sqrt(1 - gamma_in) >= 1 - gamma_in, and the float64 work errs below 2^-40 relative."""
    return _norm_sum_margin(a.shape[1], a.shape[2], g.shape[2])


def _norm_sum_margin(tokens: int, fan_in: int, fan_out: int) -> float:
    return 1 / ((1 - gamma(fan_in + 1)) * (1 - gamma(fan_out + 1)) * (1 - gamma(tokens + 1)))


def round_down(factors: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Positive float32 `factors` in `dtype`, each the largest value of `dtype` not above it."""
    rounded = factors.to(dtype)
    above = rounded.float() > factors
    return torch.where(above, (rounded.view(torch.int16) - 1).view(dtype), rounded)


def ghost_bound(a: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, float, float]:
    """(S per example, e, r) for a ghost-norm layer (items 1 and 2 above): e S^2 is the most
    rounding can take from its squared norm, r S^2 the squared most that rounding the scaled
    operand can add to its unscaled share (the bound on S's own rounding folded into both).
    Per layer only S costs device work: e and r are numbers, and `bound_terms` sums every
    layer's at once. S is summed here in float32; the fused ghost norm computes its own
    (from float32 sums of squares, square roots and sums in float64: within the same
    enlargement) and takes only `ghost_coefficients` from here."""
    norm_sum, _ = token_norm_sum(a, g)  # its enlargement is the one folded into e and r
    return norm_sum, *ghost_coefficients(a, g)


def ghost_coefficients(a: torch.Tensor, g: torch.Tensor) -> tuple[float, float]:
    """(e, r) of `ghost_bound` for the layer whose operands are `a` and `g`: numbers, worked
    out once per layer shape and precision."""
    tokens, fan_in, fan_out = a.shape[1], a.shape[2], g.shape[2]
    return _ghost_coefficients(tokens, fan_in, fan_out, a.dtype, product_error(a.dtype, a.device.type))


@functools.lru_cache(maxsize=4096)
def _ghost_coefficients(tokens: int, fan_in: int, fan_out: int, dtype: torch.dtype, errs: float) -> tuple:
    """(e, r) of `ghost_bound` for one layer shape and precision: numbers, worked out once per
    shape (a step asks for them once per layer and micro-batch)."""
    g_in = (1 + errs) * (1 + gamma(fan_in)) - 1
    g_out = (1 + errs) * (1 + gamma(fan_out)) - 1
    eps = (1 + g_in) * (1 + g_out) * (1 + 2.0**-24) * (1 + gamma(tokens * tokens + 1, FLOAT64_UNIT)) - 1
    u_scale = _UNIT_ROUNDOFF[dtype]  # the scaled operand (a's or g's: one dtype) rounds once
    share = (1 + u_scale) * (1 + errs) * (1 + gamma(tokens)) - 1
    enlarge = _norm_sum_margin(tokens, fan_in, fan_out)
    return eps * enlarge**2, (share * enlarge) ** 2


def bound_terms(
    ghosts: list, formed_squares: torch.Tensor | None, like: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(errors, roundings) per example (float64), summed over every ghost layer's
    (S, e, r) of `ghost_bound`, and from the formed parts' squared norms summed over parts
    (`formed_squares`, item 3), in a few kernels whatever the number of layers. `like`: a
    per-example float64 tensor (device, shape)."""
    errors, roundings = torch.zeros_like(like), torch.zeros_like(like)
    if ghosts:
        # S is float32 (summed here) or float64 (the fused kernel's): one stack, one cast
        squares = torch.stack([norm_sum for norm_sum, _, _ in ghosts]).double().square()
        coefficients = torch.tensor([[e, r] for _, e, r in ghosts], dtype=torch.float64)
        if like.is_cuda:  # from pinned memory, so the copy does not wait for the device
            coefficients = coefficients.pin_memory()
        coefficients = coefficients.to(like.device, non_blocking=True)
        errors, roundings = (coefficients.T @ squares).unbind(0)
    if formed_squares is not None:
        roundings = roundings + FORMED_ROUNDING**2 * formed_squares
    return errors, roundings


def bounded_clip_factors(
    squared: torch.Tensor, errors: torch.Tensor, roundings: torch.Tensor, clip_norm: float
) -> torch.Tensor:
    """min(1, C / bound) per example (float32), bound = sqrt(squared + errors) + sqrt(roundings)
    (each summed over layers, float64) enlarged by FACTOR_MARGIN, plus opacus' 1e-6."""
    bound = (squared + errors).sqrt() + roundings.sqrt()
    return (clip_norm / (bound * (1 + FACTOR_MARGIN) + 1e-6)).clamp(max=1.0).float()
