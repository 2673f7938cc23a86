"""The fused CUDA noise kernel (`dpvip.privacy.cuda_noise`), run on CPU by Triton's
interpreter, against its numpy reference; the reference's values against N(0, 1) and
against the key material (the GPU check compares the compiled kernel on the GPU too)."""

import hashlib
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from dpvip.privacy.cuda_noise import key_words, philox_reference

pytest.importorskip("triton")

A, B = hashlib.sha256(b"a").digest()[:16], hashlib.sha256(b"b").digest()[:16]

KERNEL_AGAINST_REFERENCE = """
import hashlib, numpy as np, torch
from dpvip.privacy.cuda_noise import keyed_normal_add_, philox_reference
a, b = hashlib.sha256(b"a").digest()[:16], hashlib.sha256(b"b").digest()[:16]
out = torch.full((3000,), 0.5)
keyed_normal_add_(out, 2.0, a, b)
want = 0.5 + philox_reference(3000, 2.0, a, b)
print(float(np.abs(out.numpy() - want).max()))
"""


def test_the_kernel_adds_the_reference_values():
    environment = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run(
        [sys.executable, "-c", KERNEL_AGAINST_REFERENCE], capture_output=True, text=True, env=environment, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.split()[-1]) <= 1e-6


def test_philox_matches_its_published_test_vector():
    # Random123's known-answer test for Philox-4x32-10: counter and key all 0xFFFFFFFF.
    from dpvip.privacy.cuda_noise import _philox4x32

    ones = np.full(1, 0xFFFFFFFF, dtype=np.uint64)
    words = [int(w[0]) for w in _philox4x32([ones] * 4, (0xFFFFFFFF, 0xFFFFFFFF))]
    assert words == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


def test_the_values_are_normal_with_the_given_std():
    n, std = 400_000, 3.0
    draws = philox_reference(n, std, A, B).astype(np.float64) / std
    assert abs(draws.mean()) < 5 / math.sqrt(n)
    assert draws.std() == pytest.approx(1.0, rel=5 / math.sqrt(2 * n))
    inside = np.mean(np.abs(draws) < 1)
    assert inside == pytest.approx(math.erf(1 / math.sqrt(2)), abs=5 * math.sqrt(0.6827 * 0.3173 / n))
    # fourth moment of N(0, 1) is 3: a sum of 4 Box-Muller draws, not a uniform or a single bit
    assert np.mean(draws**4) == pytest.approx(3.0, abs=0.05)


def test_every_bit_of_both_generators_matters():
    base = philox_reference(20_000, 1.0, A, B)
    for k in range(32):  # one bit in each of the 32 bytes of material
        material = bytearray(A + B)
        material[k] ^= 1 << (k % 8)
        other = philox_reference(20_000, 1.0, bytes(material[:16]), bytes(material[16:]))
        assert np.mean(other == base) < 1e-3, k
    assert len(key_words(A, B)) == 8
