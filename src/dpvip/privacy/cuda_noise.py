"""The noise on a GPU: one fused, keyed kernel (Triton) that adds std * (z1 + z2 + z3 + z4) / 2
to every coordinate in a single pass over memory.

Per coordinate i, two Philox-4x32-10 generators, each keyed by 128 bits of the release's
material (its 64-bit key, and the upper 64 bits of its 128-bit counter: the lower 64 are i),
give four 32-bit words each; their XOR gives four words w0..w3, a search having to guess
both generators (256 bits). Box-Muller turns (w0, w1) and (w2, w3) into four N(0, 1) draws,
cosine and sine of each pair (independent, as Box-Muller's two outputs are), from their
upper 24 bits: u = (w >> 8 + 1) / 2^24 in (0, 1] for the radius, v = (w >> 8) / 2^24 for the
angle. The sum of the four over 2 is N(0, 1), as on CPU, where the four come from keyed
mt19937 chunks (`dpvip.privacy.noise`); the two devices draw different values.

Nothing is written to memory but the result: 99M coordinates read and written once (0.8 GB),
where the generator-per-call path made some 15 full passes per draw. `philox_reference` is
the same computation in numpy, which the tests compare with the kernel run by Triton's
interpreter on CPU (and the GPU check on the GPU).
"""

from __future__ import annotations

import numpy as np
import torch

BLOCK = 1024
WORDS_PER_GENERATOR = 4  # key low, key high, counter word 2, counter word 3 (32 bits each)


def key_words(material_a: bytes, material_b: bytes) -> np.ndarray:
    """The kernel's 8 key words (uint32) from two generators' 16 bytes of material each."""
    if len(material_a) != 16 or len(material_b) != 16:
        raise ValueError("each Philox generator takes 16 bytes of key material")
    return np.frombuffer(material_a + material_b, dtype="<u4").astype(np.uint32)


def keyed_normal_add_(flat: torch.Tensor, std: float, material_a: bytes, material_b: bytes) -> torch.Tensor:
    """flat += N(0, std^2) per coordinate, in place (`flat`: contiguous float32, on CUDA, or on
    CPU under TRITON_INTERPRET=1)."""
    if flat.dtype != torch.float32 or not flat.is_contiguous():
        raise ValueError("the fused noise kernel adds to a contiguous float32 tensor")
    key = torch.from_numpy(key_words(material_a, material_b).view(np.int32).copy()).to(flat.device)
    n = flat.numel()
    if n:
        from dpvip.privacy.noise_kernel import keyed_normal_add  # Triton: only where this runs

        keyed_normal_add[(-(-n // BLOCK),)](flat, key, n, std / 2.0, BLOCK=BLOCK)
    return flat


def _philox4x32(counter: list[np.ndarray], key: tuple[int, int], rounds: int = 10) -> list[np.ndarray]:
    """Philox-4x32 (Salmon et al. 2011) in numpy, as Triton's `philox_impl` computes it."""
    mask = np.uint64(0xFFFFFFFF)
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in counter)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    for _ in range(rounds):
        p0, p2 = np.uint64(0xCD9E8D57) * c2, np.uint64(0xD2511F53) * c0
        c0, c1, c2, c3 = (p0 >> np.uint64(32)) ^ c1 ^ k0, p0 & mask, (p2 >> np.uint64(32)) ^ c3 ^ k1, p2 & mask
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & mask, (k1 + np.uint64(0xBB67AE85)) & mask
    return [c.astype(np.uint32) for c in (c0, c1, c2, c3)]


def philox_reference(n: int, std: float, material_a: bytes, material_b: bytes) -> np.ndarray:
    """The kernel's N(0, std^2) values for coordinates 0 .. n - 1, in numpy (float32 math)."""
    words = key_words(material_a, material_b).astype(np.uint64)
    index = np.arange(n, dtype=np.uint64)
    low, high = index & np.uint64(0xFFFFFFFF), index >> np.uint64(32)
    a = _philox4x32([low, high, np.full(n, words[2]), np.full(n, words[3])], (words[0], words[1]))
    b = _philox4x32([low, high, np.full(n, words[6]), np.full(n, words[7])], (words[4], words[5]))
    w = [x ^ y for x, y in zip(a, b)]
    unit = np.float32(2.0**-24)
    r1 = np.sqrt(np.float32(-2) * np.log(((w[0] >> 8) + 1).astype(np.float32) * unit))
    t1 = np.float32(2 * np.pi) * ((w[1] >> 8).astype(np.float32) * unit)
    r2 = np.sqrt(np.float32(-2) * np.log(((w[2] >> 8) + 1).astype(np.float32) * unit))
    t2 = np.float32(2 * np.pi) * ((w[3] >> 8).astype(np.float32) * unit)
    total = r1 * np.cos(t1) + r1 * np.sin(t1) + r2 * np.cos(t2) + r2 * np.sin(t2)
    return np.float32(std / 2.0) * total
