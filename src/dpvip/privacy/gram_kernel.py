"""The Triton kernel of `dpvip.privacy.fused_ghost` (a module of its own: Triton resolves a
kernel's names in its module, and only GPU runs and their tests import Triton)."""

import triton
import triton.language as tl

# Tile shapes tried once per layer shape (tokens, fan-in, fan-out) on the device; every one
# computes the same kind of sum (float32 Gram entries, exact float64 products, float64 sums).
CONFIGS = [
    triton.Config({"BLOCK_T": 32, "BLOCK_K": 64}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_T": 64, "BLOCK_K": 64}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_T": 64, "BLOCK_K": 32}, num_warps=4, num_stages=4),
    triton.Config({"BLOCK_T": 64, "BLOCK_K": 128}, num_warps=8, num_stages=3),
]


@triton.jit
def _gram_tile(base, rows, cols, tokens, features, stride_token, stride_feature, BLOCK_T, BLOCK_K, WIDE):
    """X[rows] X[cols]^T of one example's (tokens, features) X, accumulated in float32; with
    WIDE, the operands widened to float32 and multiplied in IEEE float32 (not TF32)."""
    tile = tl.zeros((BLOCK_T, BLOCK_T), dtype=tl.float32)
    offsets = tl.arange(0, BLOCK_K)
    for start in range(0, features, BLOCK_K):
        k = start + offsets
        left = tl.load(
            base + rows[:, None] * stride_token + k[None, :] * stride_feature,
            mask=(rows[:, None] < tokens) & (k[None, :] < features),
            other=0.0,
        )
        right = tl.load(
            base + cols[None, :] * stride_token + k[:, None] * stride_feature,
            mask=(cols[None, :] < tokens) & (k[:, None] < features),
            other=0.0,
        )
        if WIDE:
            tile = tl.dot(left.to(tl.float32), right.to(tl.float32), tile, input_precision="ieee")
        else:
            tile = tl.dot(left, right, tile)
    return tile


@triton.jit
def ghost_norm_tiles(
    a_ptr, g_ptr, out_ptr, tokens, fan_in, fan_out,
    a_example, a_token, a_feature, g_example, g_token, g_feature, out_example, out_part,
    BLOCK_T: tl.constexpr, BLOCK_K: tl.constexpr, WIDE: tl.constexpr,
):  # fmt: skip
    """For block row i <= block column j of one example's tokens:
    out[example, 0, i * blocks + j] = w * the sum of the (i, j) tile of A A^T (.) G G^T (w = 2
    right of the diagonal, whose mirror tile is not formed; left of it 0), and on the
    diagonal out[example, 1, i * blocks + i] = sum over its tokens t of
    sqrt((A A^T)_tt) sqrt((G G^T)_tt), the tile's part of S = sum_t ||a_t|| ||g_t|| (off it
    0). Every program writes both parts of its slot, so `out` needs no zeroing.
    WIDE: float32 operands, or the interpreter, whose `tl.dot` multiplies 16-bit tiles
    wrongly (numpy has no bf16); a 16-bit product is exact in float32, so widening changes
    at most the accumulation order."""
    example = tl.program_id(0).to(tl.int64)
    i, j = tl.program_id(1), tl.program_id(2)
    here = out_ptr + example * out_example
    if j < i:
        tl.store(here + i * tl.num_programs(2) + j, 0.0)
        tl.store(here + out_part + i * tl.num_programs(2) + j, 0.0)
    else:
        rows = i * BLOCK_T + tl.arange(0, BLOCK_T)
        cols = j * BLOCK_T + tl.arange(0, BLOCK_T)
        gram_a = _gram_tile(
            a_ptr + example * a_example, rows, cols, tokens, fan_in, a_token, a_feature, BLOCK_T, BLOCK_K, WIDE
        )
        gram_g = _gram_tile(
            g_ptr + example * g_example, rows, cols, tokens, fan_out, g_token, g_feature, BLOCK_T, BLOCK_K, WIDE
        )
        # float32 x float32 is exact in float64: the only roundings left are the Grams' and the sums'
        total = tl.sum(tl.sum(gram_a.to(tl.float64) * gram_g.to(tl.float64), axis=1), axis=0)
        weight = tl.where(i == j, 1.0, 2.0).to(tl.float64)
        tl.store(here + i * tl.num_programs(2) + j, total * weight)
        if i < j:
            tl.store(here + out_part + i * tl.num_programs(2) + j, 0.0)
        else:  # the squared token norms are the Grams' diagonals (one entry a row: exact sums)
            diagonal = rows[:, None] == cols[None, :]
            squares_a = tl.sum(tl.where(diagonal, gram_a, 0.0), axis=1).to(tl.float64)
            squares_g = tl.sum(tl.where(diagonal, gram_g, 0.0), axis=1).to(tl.float64)
            norm_sum = tl.sum(tl.sqrt(squares_a) * tl.sqrt(squares_g), axis=0)
            tl.store(here + out_part + i * tl.num_programs(2) + i, norm_sum)


def tuned(do_bench=None):
    """`ghost_norm_tiles` choosing its tile shape per layer shape by timing each of CONFIGS
    (`do_bench`: Triton's timer on the device; the tests pass one for the interpreter).
    The layout of `out` follows BLOCK_T; the timed runs of other shapes leave tiles in it,
    but `fused_ghost_tiles` returns only the slots of the grid launched last, each of
    which that launch writes."""
    return triton.autotune(CONFIGS, key=["tokens", "fan_in", "fan_out"], do_bench=do_bench)(ghost_norm_tiles)


ghost_norm_tuned = tuned()
