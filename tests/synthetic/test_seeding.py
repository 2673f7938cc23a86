"""Per-image seeds: a pure function of (dataset seed, family, purpose, number), distinct per key."""

import numpy as np
import torch

from dpvip.synthetic.seeding import IMAGE, NETWORK, PROGRAM, derive_seed, numpy_rng, torch_rng


def test_seed_is_a_pure_function_of_its_keys():
    # Same keys, separate calls: the same seed (no hidden global state such as a counter).
    assert derive_seed(3, "shaders", IMAGE, 17) == derive_seed(3, "shaders", IMAGE, 17)
    assert np.array_equal(numpy_rng(3, "shaders", IMAGE, 17).random(8), numpy_rng(3, "shaders", IMAGE, 17).random(8))
    assert torch.equal(
        torch.randn(8, generator=torch_rng(3, "x", NETWORK, 2)), torch.randn(8, generator=torch_rng(3, "x", NETWORK, 2))
    )


def test_every_key_changes_the_seed():
    base = (0, "shaders", IMAGE, 5)
    variants = [
        (1, "shaders", IMAGE, 5),
        (0, "dead_leaves", IMAGE, 5),
        (0, "shaders", PROGRAM, 5),
        (0, "shaders", NETWORK, 5),
        (0, "shaders", IMAGE, 6),
    ]
    seeds = {derive_seed(*keys) for keys in [base, *variants]}
    assert len(seeds) == 1 + len(variants)


def test_seeds_fit_torch_signed_64_bit_generators():
    # torch.Generator.manual_seed takes a signed 64-bit value: the seed must be in [0, 2^63).
    seeds = [
        derive_seed(s, "stylegan_oriented", purpose, n)
        for s in range(4)
        for purpose in (IMAGE, NETWORK)
        for n in range(50)
    ]
    assert all(0 <= s < 2**63 for s in seeds)
    assert len(set(seeds)) == len(seeds)
    assert max(seeds) > 2**60  # the top bits are used, not a small range
