"""Epoch batches: a permutation per epoch cut into global batches, split evenly over ranks,
all a function of (seed, step), so any number of ranks and any resume step see the same
global batches with the same per-sample seeds."""

from __future__ import annotations

import pytest
import torch

from dpvip.data.sampling import EpochBatches, derive, sample_seed
from dpvip.errors import DpvipInputError

SAMPLES, BATCH, EPOCHS, SEED = 100, 8, 3, 3
STEPS_PER_EPOCH = SAMPLES // BATCH  # 12; the last 4 samples of each epoch are dropped


def batches(**overrides) -> list[list[tuple[int, int]]]:
    values = {
        "num_samples": SAMPLES,
        "batch_size": BATCH,
        "total_steps": EPOCHS * STEPS_PER_EPOCH,
        "seed": SEED,
    } | overrides
    return list(EpochBatches(**values))


def test_each_epoch_visits_a_sample_at_most_once_and_epochs_differ():
    sampler = EpochBatches(SAMPLES, BATCH, EPOCHS * STEPS_PER_EPOCH, SEED)
    assert sampler.steps_per_epoch == STEPS_PER_EPOCH
    everything = list(sampler)
    assert len(everything) == len(sampler) == EPOCHS * STEPS_PER_EPOCH
    orders = []
    for epoch in range(EPOCHS):
        indices = [i for batch in everything[epoch * STEPS_PER_EPOCH : (epoch + 1) * STEPS_PER_EPOCH] for i, _ in batch]
        assert all(len(batch) == BATCH for batch in everything)
        assert len(indices) == len(set(indices)) == STEPS_PER_EPOCH * BATCH
        assert all(0 <= i < SAMPLES for i in indices)
        orders.append(indices)
    assert orders[0] != orders[1] != orders[2] != orders[0]


def test_the_same_seed_gives_the_same_batches_and_another_seed_others():
    assert batches() == batches()
    assert batches(seed=SEED + 1) != batches()


def test_seeds_are_per_sample_and_epoch():
    everything = batches()
    for step, batch in enumerate(everything):
        for index, seed in batch:
            assert seed == sample_seed(SEED, step // STEPS_PER_EPOCH, index)
    # a sample drawn in two epochs gets two different seeds
    first = dict(everything[0])
    second = {i: s for batch in everything[STEPS_PER_EPOCH : 2 * STEPS_PER_EPOCH] for i, s in batch}
    shared = set(first) & set(second)
    assert shared and all(first[i] != second[i] for i in shared)
    assert 0 <= derive(2**40, 7) < 2**63
    torch.Generator().manual_seed(derive(2**40, 7))  # a valid torch seed


@pytest.mark.parametrize("world", [2, 4])
def test_rank_batches_joined_in_rank_order_are_the_one_process_batch(world):
    single = batches()
    per_rank = [batches(rank=rank, world=world) for rank in range(world)]
    for step, global_batch in enumerate(single):
        shares = [per_rank[rank][step] for rank in range(world)]
        assert all(len(share) == BATCH // world for share in shares)
        assert [pair for share in shares for pair in share] == global_batch  # indices and seeds


@pytest.mark.parametrize("start", [0, 5, STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH + 1, EPOCHS * STEPS_PER_EPOCH])
def test_start_step_skips_exactly_the_steps_before_it(start):
    sampler = EpochBatches(SAMPLES, BATCH, EPOCHS * STEPS_PER_EPOCH, SEED, rank=1, world=2, start_step=start)
    assert len(sampler) == EPOCHS * STEPS_PER_EPOCH - start
    assert list(sampler) == batches(rank=1, world=2)[start:]


def test_a_batch_that_does_not_divide_over_the_ranks_is_refused_by_number():
    with pytest.raises(DpvipInputError, match=r"^batch size 10 does not divide over 4 ranks$"):
        EpochBatches(SAMPLES, 10, 5, SEED, rank=0, world=4)


def test_a_dataset_smaller_than_the_batch_is_refused_by_number():
    with pytest.raises(DpvipInputError, match=r"^the dataset has 5 samples, fewer than the batch size 8$"):
        EpochBatches(5, 8, 5, SEED)
