"""privatize: the global sum of clipped gradients plus N(0, sigma^2 C^2) once, divided by the
expected batch size; the noise is a function of (the run's key, step) only, each value the
sum of four draws over 2 (opacus' secure_mode; see dpvip.privacy.randomness)."""

import math

import pytest
import torch

from dpvip.privacy import noise as noise_module
import hashlib

import numpy as np

from dpvip.privacy.noise import (
    DRAWS,
    MT_WORDS,
    gaussian_noise,
    keyed_cpu_generator,
    noise_stream,
    privatize,
    privatize_,
)
from dpvip.privacy.randomness import RunRandomness

CPU = torch.device("cpu")
# About 1e6 values in tensors of several shapes (a matrix, a vector, a 4-D kernel, a scalar).
SHAPES = [(1000, 700), (300_000,), (10, 3, 10, 10), ()]


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def distinct_sums(shapes=SHAPES):
    """Tensors whose values tell every element of every tensor apart."""
    sums, offset = [], 0
    for shape in shapes:
        numel = math.prod(shape)
        sums.append((torch.arange(offset, offset + numel, dtype=torch.float32) / 1000).reshape(shape))
        offset += numel
    return sums


def test_noise_on_zero_sums_has_std_sigma_c_over_expected_batch():
    sigma, clip_norm, batch = 0.7, 2.5, 64.0
    sums = [torch.zeros(shape) for shape in SHAPES]
    result = privatize(sums, sigma, clip_norm, batch, noise_stream(RunRandomness.seeded(11), 5, CPU))
    flat = torch.cat([part.reshape(-1) for part in result]).double()
    n = flat.numel()
    assert n > 900_000
    expected_std = sigma * clip_norm / batch
    # The sample std of N Gaussians has standard error std / sqrt(2N) (~7e-4 relative): 5 of them.
    assert flat.std().item() == pytest.approx(expected_std, rel=5 / math.sqrt(2 * n))
    assert abs(flat.mean().item()) < 5 * expected_std / math.sqrt(n)
    # Gaussian, not merely the right variance: P(|z| < 1) = 0.6827, standard error ~5e-4.
    inside = (flat.abs() < expected_std).double().mean().item()
    assert inside == pytest.approx(math.erf(1 / math.sqrt(2)), abs=5 * math.sqrt(0.6827 * 0.3173 / n))
    # The same noise level in every tensor: each part's std is right too (looser: fewer values).
    for part in result[:3]:
        assert part.double().std().item() == pytest.approx(expected_std, rel=5 / math.sqrt(2 * part.numel()))


def test_in_place_privatisation_writes_the_same_result_into_the_sums_buffer():
    shapes = SHAPES[:3]
    flat = torch.cat([s.reshape(-1) for s in distinct_sums(shapes)])
    sums = [part.view(shape) for part, shape in zip(flat.split([math.prod(s) for s in shapes]), shapes)]
    expected = privatize(sums, 0.7, 2.5, 64.0, noise_stream(RunRandomness.seeded(4), 2, CPU))
    result = privatize_(flat, 0.7, 2.5, 64.0, noise_stream(RunRandomness.seeded(4), 2, CPU))
    assert result.data_ptr() == flat.data_ptr()
    for part, want in zip(sums, expected):
        assert torch.equal(part, want)
    assert torch.equal(flat, torch.cat([w.reshape(-1) for w in expected]))


def test_without_noise_the_result_is_sum_over_expected_batch_split_per_tensor():
    sums = distinct_sums()
    originals = [s.clone() for s in sums]
    result = privatize(sums, 0.0, 1.0, 40.0, noise_stream(RunRandomness.seeded(0), 0, CPU))
    assert [part.shape for part in result] == [s.shape for s in sums]
    for part, total in zip(result, sums):
        assert part.dtype == torch.float32
        torch.testing.assert_close(part, total / 40.0)
    assert all(torch.equal(s, o) for s, o in zip(sums, originals))  # the inputs are left alone


def test_all_reduce_comes_before_the_noise_which_is_added_once():
    sigma, clip_norm, batch, seed, step = 1.3, 0.8, 32.0, 7, 3
    sums = distinct_sums([(20, 30), (17,)])
    seen = []

    def all_reduce(flat):  # two ranks with the same sums
        seen.append(flat.clone())
        flat.mul_(2)

    result = privatize(sums, sigma, clip_norm, batch, noise_stream(RunRandomness.seeded(seed), step, CPU), all_reduce)
    # all_reduce saw exactly this rank's sums, flat and without noise.
    assert len(seen) == 1
    torch.testing.assert_close(seen[0], torch.cat([s.reshape(-1) for s in sums]))
    noise = gaussian_noise((617,), sigma * clip_norm, noise_stream(RunRandomness.seeded(seed), step, CPU))
    expected = (2 * torch.cat([s.reshape(-1) for s in sums]) + noise) / batch
    got = torch.cat([part.reshape(-1) for part in result])
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-7)
    # Noise added before the all-reduce would be counted twice: 2 (sum + noise) / B differs
    # from the result by noise / B (std sigma C / B = 0.03), which this test would see.
    assert (got - 2 * (torch.cat([s.reshape(-1) for s in sums]) + noise) / batch).abs().max() > 0.05


def test_noise_depends_on_seed_and_step_only():
    def noise(seed, step):
        return privatize(
            [torch.zeros(50, 4), torch.zeros(30)], 1.0, 1.0, 1.0, noise_stream(RunRandomness.seeded(seed), step, CPU)
        )

    first = noise(3, 10)
    again = noise(3, 10)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    for other in (noise(3, 11), noise(4, 10)):
        for a, b in zip(first, other):
            assert not torch.isclose(a, b).any()


def test_gaussian_noise_is_float32_with_the_given_shape_and_scale():
    draws = gaussian_noise((200, 500), 3.0, noise_stream(RunRandomness.seeded(1), 2, CPU))
    assert draws.shape == (200, 500) and draws.dtype == torch.float32
    assert draws.std().item() == pytest.approx(3.0, rel=5 / math.sqrt(2 * draws.numel()))


def test_each_noise_value_is_four_standard_draws_summed_and_halved():
    """Not one Box-Muller draw, whose floating-point pattern an attacker can read back."""
    stream = noise_stream(RunRandomness.seeded(5), 0, CPU)
    draws = gaussian_noise((1000,), 3.0, stream)
    chunk = keyed_cpu_generator(stream.chunk_material(0, b"mt19937", 4 * MT_WORDS))  # the one chunk
    single = [torch.randn(1000, generator=chunk) for _ in range(DRAWS)]
    assert DRAWS == 4
    torch.testing.assert_close(draws, sum(single) * 3.0 / 2)


def test_the_cpu_generator_state_is_all_624_words_of_key_material():
    """torch's mt19937 from `keyed_cpu_generator` is the standard mt19937 whose 624 state
    words are the given bytes (numpy's MT19937 with that key gives the same outputs; torch
    draws an int64 from two 32-bit outputs): every one of the 19,968 bits is used, where
    `manual_seed` keeps 32 bits of a seed."""
    words = hashlib.shake_256(b"test words").digest(4 * MT_WORDS)
    ours = torch.empty(1500, dtype=torch.int64).random_(0, 2**31, generator=keyed_cpu_generator(words))
    reference = np.random.MT19937()
    key = np.frombuffer(words, dtype="<u4").astype(np.uint32)
    reference.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": MT_WORDS}}
    assert np.array_equal(ours.numpy(), reference.random_raw(3000)[1::2] % 2**31)
    last_word_flipped = words[:-1] + bytes([words[-1] ^ 1])
    other = torch.empty(1500, dtype=torch.int64).random_(0, 2**31, generator=keyed_cpu_generator(last_word_flipped))
    assert (ours != other).any()  # the last word counts too (mt19937 spreads a change over later draws)


def _keys_whose_old_seeds_share_32_bits(stream_step: int = 0) -> tuple[RunRandomness, RunRandomness]:
    """Two seeded keys whose 63-bit noise seeds (the old derivation: `seed("noise", step)`,
    of which torch's CPU generator kept the low 32 bits) agree in those 32 bits: a birthday
    search over about 2^16 keys."""
    seen = {}
    for seed in range(1 << 20):
        low = RunRandomness.seeded(seed).seed("noise", stream_step) & 0xFFFFFFFF
        if low in seen:
            return RunRandomness.seeded(seen[low]), RunRandomness.seeded(seed)
        seen[low] = seed
    raise AssertionError("no collision in 2^20 keys")


def test_keys_whose_seeds_share_their_low_32_bits_give_different_noise():
    """Finding 1 of the privacy review: seeding the noise with `manual_seed` gave 2^32 streams
    (these two keys drew identical noise). The noise now takes the step's 256 bits."""
    first, second = _keys_whose_old_seeds_share_32_bits()
    assert first.seed("noise", 0) != second.seed("noise", 0)
    assert (first.seed("noise", 0) ^ second.seed("noise", 0)) & 0xFFFFFFFF == 0
    a = gaussian_noise((20_000,), 1.0, noise_stream(first, 0, CPU))
    b = gaussian_noise((20_000,), 1.0, noise_stream(second, 0, CPU))
    assert not (a == b).any() and abs(torch.corrcoef(torch.stack([a, b]))[0, 1]) < 0.05


def test_material_sharing_its_first_64_bits_gives_different_noise():
    """A stream depends on all 256 bits of its material, not on a 64-bit prefix (CUDA's
    Philox takes a 64-bit key: two generators of 128 bits each there)."""
    material = hashlib.sha256(b"material").digest()
    twin = material[:16] + bytes(16)  # the first 64 and 128 bits shared
    a = gaussian_noise((20_000,), 1.0, type(noise_stream(RunRandomness.seeded(0), 0, CPU))(material, CPU))
    b = gaussian_noise((20_000,), 1.0, type(noise_stream(RunRandomness.seeded(0), 0, CPU))(twin, CPU))
    assert not (a == b).any() and abs(torch.corrcoef(torch.stack([a, b]))[0, 1]) < 0.05


def test_a_stream_never_prints_its_material():
    stream = noise_stream(RunRandomness.seeded(1), 0, CPU)
    assert stream.material.hex() not in repr(stream) and str(stream.material) not in repr(stream)


def test_chunks_draw_their_own_streams_and_the_thread_count_changes_nothing(monkeypatch):
    """Chunk k draws from its own generators keyed by the step's material and k, on all of
    torch's threads at once: 1 and 2 threads give the same bits, and no chunk repeats another."""
    monkeypatch.setattr(noise_module, "NOISE_CHUNK", 1000)
    draws = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        draws[threads] = gaussian_noise((5, 1000), 1.0, noise_stream(RunRandomness.seeded(9), 4, CPU))
    torch.set_num_threads(1)
    assert torch.equal(draws[1], draws[2])
    first = draws[1]
    assert all((first[i] - first[j]).abs().min() > 0 for i in range(5) for j in range(i))
    assert abs(float(torch.corrcoef(first).triu(1).abs().max())) < 0.15  # 1000 draws: |r| ~ 0.03
