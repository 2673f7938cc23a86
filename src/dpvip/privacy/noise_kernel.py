"""The Triton kernel of `dpvip.privacy.cuda_noise` (a module of its own: Triton resolves a
kernel's names in its module, and only GPU runs and their tests import Triton)."""

import triton
import triton.language as tl
from triton.language.random import philox_impl


@triton.jit
def _radius(word):
    """sqrt(-2 ln u), u = (upper 24 bits + 1) / 2^24 in (0, 1]."""
    return tl.sqrt(-2.0 * tl.log(((word >> 8) + 1).to(tl.float32) * 5.9604644775390625e-08))


@triton.jit
def _angle(word):
    """2 pi v, v = upper 24 bits / 2^24 in [0, 1)."""
    return ((word >> 8).to(tl.float32) * 5.9604644775390625e-08) * 6.283185307179586


@triton.jit
def keyed_normal_add(out_ptr, key_ptr, n, scale, BLOCK: tl.constexpr):
    """out[i] += scale * (four N(0, 1) draws of coordinate i), i < n."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    low = (offsets & 0xFFFFFFFF).to(tl.uint32)
    high = (offsets >> 32).to(tl.uint32)
    zero = tl.zeros_like(low)
    key = key_ptr.to(tl.pointer_type(tl.uint32))
    a0, a1, a2, a3 = philox_impl(
        low, high, zero + tl.load(key + 2), zero + tl.load(key + 3), zero + tl.load(key + 0), zero + tl.load(key + 1)
    )
    b0, b1, b2, b3 = philox_impl(
        low, high, zero + tl.load(key + 6), zero + tl.load(key + 7), zero + tl.load(key + 4), zero + tl.load(key + 5)
    )
    r1, t1 = _radius(a0 ^ b0), _angle(a1 ^ b1)
    r2, t2 = _radius(a2 ^ b2), _angle(a3 ^ b3)
    total = r1 * tl.cos(t1) + r1 * tl.sin(t1) + r2 * tl.cos(t2) + r2 * tl.sin(t2)
    values = tl.load(out_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, values + scale * total, mask=mask)
