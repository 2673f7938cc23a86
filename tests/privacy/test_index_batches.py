"""`IndexBatches`: a DP step's Poisson batches as plain index lists, so that a `DataLoader`
over any map-style `Dataset` takes them as its batch sampler; `PoissonBatches` itself still
yields (index, seed) pairs, as dpvip's datasets take them."""

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dpvip.errors import DpvipInputError
from dpvip.privacy import ClippedGradientSum, DPStep, IndexBatches, PoissonBatches, PrivacyLedger, RunRandomness
from dpvip.privacy.sampling import example_seed

N, Q, STEPS = 300, 0.1, 6


def dp_step(randomness=None) -> DPStep:
    layer = nn.Linear(3, 2)
    ledger = PrivacyLedger.calibrate("rdp", Q, STEPS, 8.0, 1e-5, 1.0)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    return DPStep(ClippedGradientSum(layer, 1.0), optimizer, ledger, N, randomness or RunRandomness.fresh())


def test_index_batches_are_the_dp_steps_batches_as_plain_lists():
    step = dp_step()
    batches = list(IndexBatches(step.sampler))
    assert len(batches) == len(IndexBatches(step.sampler)) == STEPS
    for number, batch in enumerate(batches):
        assert batch == step.batch(number).tolist() and all(type(index) is int for index in batch)
    assert sum(map(len, batches)) > 0  # q n = 30 per step


def test_a_data_loader_over_a_tensor_dataset_takes_them_as_its_batch_sampler():
    step = dp_step()
    data = TensorDataset(torch.arange(N).float()[:, None] * 2, torch.arange(N))
    loader = DataLoader(data, batch_sampler=IndexBatches(step.sampler))
    seen = list(loader)
    assert len(seen) == STEPS
    for number, (features, labels) in enumerate(seen):
        chosen = torch.as_tensor(step.batch(number))
        assert torch.equal(labels, chosen) and torch.equal(features[:, 0], chosen.float() * 2)


def test_a_resumed_loader_goes_on_with_the_steps_it_left():
    step = dp_step(RunRandomness.seeded(4))
    whole = list(IndexBatches(step.sampler))
    resumed = IndexBatches(step.sampler, start_step=4)
    assert len(resumed) == STEPS - 4 and list(resumed) == whole[4:]
    assert list(IndexBatches(step.sampler, start_step=STEPS)) == []
    with pytest.raises(DpvipInputError, match=r"start step 7 is outside the run's steps \[0, 6\]"):
        IndexBatches(step.sampler, start_step=STEPS + 1)


def test_the_default_start_is_the_samplers_and_poisson_batches_keep_their_pairs():
    randomness = RunRandomness.seeded(5)
    sampler = PoissonBatches(N, Q, STEPS, randomness, start_step=2)
    pairs = list(sampler)
    plain = list(IndexBatches(sampler))
    assert len(pairs) == len(plain) == STEPS - 2
    for number, (with_seeds, indices) in enumerate(zip(pairs, plain), start=2):
        assert with_seeds == [(index, example_seed(randomness, number, index)) for index in indices]
