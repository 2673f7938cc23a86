"""Poisson sampling as the accountant assumes it: every example independently with
probability q at every step, over all ranks together.

The statistical bounds are deterministic (fixed seeds) but chosen as if they were not:
about 4-5 standard errors, so a correct sampler passes for almost every seed while the
failures they guard against (fixed batch sizes, whole blocks in or out, draws repeated
across steps, blocks or ranks) miss them by far more."""

import math

import numpy as np
import pytest
from scipy import stats

from dpvip.errors import DpvipInputError
from dpvip.privacy.randomness import RunRandomness
from dpvip.privacy.sampling import BLOCK, PoissonBatches, example_seed

S = RunRandomness.seeded  # published seeds: tests only (not private)


def inclusions(sampler: PoissonBatches, steps: int) -> np.ndarray:
    """(steps, n) booleans: whether each example is in this rank's batch at each step."""
    table = np.zeros((steps, sampler.num_samples), dtype=bool)
    for step in range(steps):
        table[step, sampler.indices(step)] = True
    return table


def test_batch_sizes_are_binomial():
    n, q, steps = 5000, 0.02, 400
    sizes = np.array([len(PoissonBatches(n, q, steps, S(1)).indices(step)) for step in range(steps)])
    mean, variance = n * q, n * q * (1 - q)
    # Mean of 400 Binomial(5000, 0.02) draws: standard error sqrt(98 / 400) ~ 0.5.
    assert abs(sizes.mean() - mean) < 4 * math.sqrt(variance / steps)
    # (steps - 1) s^2 / variance is ~ chi-square(steps - 1) (the binomial is near-normal at
    # n q = 100): inside its central 99.998% (about +-28% on s^2). A fixed batch size
    # (variance 0) or whole blocks drawn together (variance ~1000x) fall far outside.
    statistic = (steps - 1) * sizes.var(ddof=1) / variance
    assert stats.chi2.ppf(1e-5, steps - 1) < statistic < stats.chi2.ppf(1 - 1e-5, steps - 1)


def test_every_example_is_included_with_probability_q():
    n, q, steps = 2 * BLOCK + 300, 0.3, 200  # three blocks, the last one partial
    counts = inclusions(PoissonBatches(n, q, steps, S(2)), steps).sum(axis=0)
    # Each count is Binomial(200, 0.3); sum_i (count_i - Tq)^2 / (Tq(1-q)) is ~ chi-square(n).
    statistic = ((counts - steps * q) ** 2 / (steps * q * (1 - q))).sum()
    assert stats.chi2.ppf(1e-5, n) < statistic < stats.chi2.ppf(1 - 1e-5, n)
    # And no example is far off (6.5 standard deviations; the max of n normals is ~3.7).
    assert np.abs(counts - steps * q).max() < 6.5 * math.sqrt(steps * q * (1 - q))


def test_inclusions_of_different_examples_are_uncorrelated():
    n, q, steps = 3 * BLOCK, 0.3, 300
    table = inclusions(PoissonBatches(n, q, steps, S(3)), steps).astype(float)
    centred = table - q

    def covariances(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return (centred[:, first] * centred[:, second]).mean(axis=0)

    base = np.arange(0, BLOCK - 1)
    pairs = {
        "neighbours in a block": (base, base + 1),
        "same offset, next block": (base, base + BLOCK),
        "same offset, two blocks apart": (base, base + 2 * BLOCK),
        "one step apart (same example)": None,
    }
    scale = q * (1 - q)  # the variance of one inclusion
    for name, pair in pairs.items():
        if pair is None:  # an example's inclusion at step t and t + 1
            cov = (centred[:-1] * centred[1:]).mean(axis=0)
        else:
            cov = covariances(*pair)
        # One pair's covariance estimate has standard error ~ scale / sqrt(steps); the mean
        # over ~1000 pairs (nearly independent) ~ scale / sqrt(steps * pairs).
        assert abs(cov.mean()) < 5 * scale / math.sqrt(steps * len(cov)), name
        assert np.abs(cov).max() < 5.5 * scale / math.sqrt(steps), name


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_partition_the_single_rank_batch(world):
    n, q, steps, seed = 5 * BLOCK + 17, 0.1, 20, 4
    single = PoissonBatches(n, q, steps, S(seed))
    ranks = [PoissonBatches(n, q, steps, S(seed), rank=rank, world=world) for rank in range(world)]
    for step in range(steps):
        parts = [r.indices(step) for r in ranks]
        assert all(len(part) > 0 for part in parts)
        union = np.concatenate(parts)
        assert len(set(union.tolist())) == len(union)  # disjoint
        np.testing.assert_array_equal(np.sort(union), single.indices(step))
        # Each rank's examples come from its own blocks, block b on rank b mod world.
        for rank, part in enumerate(parts):
            assert set((part // BLOCK) % world) <= {rank}
            assert list(part) == sorted(part)
    # The batches with their seeds agree too.
    merged = sorted(pair for r in ranks for pair in r.rank_batch(7))
    assert merged == single.rank_batch(7)


def test_ranks_draw_independently():
    n, q, steps = 4 * BLOCK, 0.05, 400
    sizes = np.array(
        [
            [len(PoissonBatches(n, q, steps, S(5), rank=rank, world=2).indices(step)) for rank in (0, 1)]
            for step in range(steps)
        ]
    )
    assert sizes.min() > 0
    # Sample correlation of independent sizes: standard error 1 / sqrt(400) = 0.05.
    assert abs(np.corrcoef(sizes[:, 0], sizes[:, 1])[0, 1]) < 0.25
    # Both ranks hold half the examples: each size has mean n q / 2.
    assert sizes.mean(axis=0) == pytest.approx([n * q / 2] * 2, abs=4 * math.sqrt(n / 2 * q * (1 - q) / steps))


def test_start_step_resumes_the_same_batches():
    full = list(PoissonBatches(3000, 0.05, 12, S(6)))
    resumed = PoissonBatches(3000, 0.05, 12, S(6), start_step=5)
    assert len(full) == 12 and len(resumed) == 7
    assert list(resumed) == full[5:]
    assert len(PoissonBatches(3000, 0.05, 12, S(6), start_step=20)) == 0
    assert list(PoissonBatches(3000, 0.05, 12, S(6), start_step=20)) == []
    # Another seed, other batches.
    assert list(PoissonBatches(3000, 0.05, 12, S(7))) != full


def test_rank_batch_pairs_each_index_with_its_example_seed():
    sampler = PoissonBatches(2000, 0.1, 5, S(8))
    batch = sampler.rank_batch(3)
    assert [index for index, _ in batch] == sampler.indices(3).tolist()
    assert all(isinstance(index, int) and isinstance(seed, int) for index, seed in batch)
    assert all(seed == example_seed(S(8), 3, index) for index, seed in batch)
    assert len({seed for _, seed in batch}) == len(batch)


def test_example_seeds_differ_per_step_index_and_run():
    seeds = {example_seed(S(run), step, index) for run in (0, 1) for step in range(20) for index in range(200)}
    assert len(seeds) == 2 * 20 * 200
    assert all(0 <= seed < 2**63 for seed in seeds)  # a torch generator takes it
    assert example_seed(S(0), 3, 4) == example_seed(S(0), 3, 4)


@pytest.mark.parametrize("rate", [0.0, -0.1, 1.5, float("nan")])
def test_invalid_sample_rate_is_refused(rate):
    with pytest.raises(DpvipInputError, match="sample rate"):
        PoissonBatches(100, rate, 10, S(0))


def test_empty_dataset_is_refused():
    with pytest.raises(DpvipInputError, match="at least one example"):
        PoissonBatches(0, 0.1, 10, S(0))


def test_sample_rate_one_takes_every_example():
    sampler = PoissonBatches(BLOCK + 5, 1.0, 3, S(0))
    assert all(len(batch) == BLOCK + 5 for batch in sampler)
