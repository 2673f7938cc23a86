"""MoCo (DP-RandP Table 11): InfoNCE against a loop, the key encoder's moving average, the
queue's wrap-around, and one step of the module against the same step written out by hand."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dpvip.randp.moco import MoCo, info_nce_loss

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def sphere(n: int, dim: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(n, dim, generator=generator, dtype=torch.float64), dim=1)


def naive_info_nce(queries, keys, negatives, temperature) -> float:
    total = 0.0

    def dot(a, b):
        return sum(x * y for x, y in zip(a, b))

    for q, k in zip(queries.tolist(), keys.tolist()):
        positive = math.exp(dot(q, k) / temperature)
        others = sum(math.exp(dot(q, n) / temperature) for n in negatives.tolist())
        total += -math.log(positive / (positive + others))
    return total / len(queries)


class Unit(nn.Module):
    """A linear map onto the unit sphere: a small stand-in for the WRN and its head."""

    def __init__(self, dim_in: int, dim_out: int):
        super().__init__()
        self.linear = nn.Linear(dim_in, dim_out, dtype=torch.float64)

    def forward(self, x):
        return F.normalize(self.linear(x), dim=1)


def moco(queue: int = 5, dim: int = 3, momentum: float = 0.9, temperature: float = 0.5) -> MoCo:
    torch.manual_seed(0)
    module = MoCo(Unit(4, dim), dim, queue, momentum, temperature)
    module.queue = module.queue.double()
    return module


@pytest.mark.parametrize("temperature", [0.07, 0.5, 1.0])
def test_info_nce_matches_a_loop(temperature):
    q, k, negatives = sphere(4, 6, 0), sphere(4, 6, 1), sphere(7, 6, 2)
    assert info_nce_loss(q, k, negatives, temperature).item() == pytest.approx(
        naive_info_nce(q, k, negatives, temperature), rel=1e-10
    )


def test_the_key_encoder_starts_as_a_frozen_copy_and_follows_a_moving_average():
    module = moco(momentum=0.9)
    query, key = module.encoder.linear, module.key_encoder.linear
    assert torch.equal(query.weight, key.weight) and not key.weight.requires_grad
    before_key = key.weight.detach().clone()
    with torch.no_grad():
        query.weight.add_(1.0)
    module.update_key_encoder()
    assert torch.allclose(key.weight, 0.9 * before_key + 0.1 * query.weight, rtol=0, atol=1e-12)
    assert sum(p.numel() for p in module.parameters() if p.requires_grad) == sum(
        p.numel() for p in module.encoder.parameters()
    )


def test_the_queue_overwrites_its_oldest_keys_and_wraps_around():
    module = moco(queue=5)
    batches = [sphere(3, 3, 10), sphere(3, 3, 11), sphere(2, 3, 12), sphere(7, 3, 13)]
    expected, pointer = module.queue.clone(), 0
    for keys in batches:
        module.enqueue(keys)
        for key in keys:  # one by one, the definition
            expected[pointer] = key
            pointer = (pointer + 1) % 5
        assert module.queue_pointer.item() == pointer
        assert torch.equal(module.queue, expected)
    # 3 + 3 + 2 + 7 = 15 keys: the last batch, larger than the queue, starts at slot 3 and
    # leaves its newest five in slots 0..4.
    assert pointer == 0 and torch.equal(module.queue, batches[-1][-5:])


def test_one_step_equals_the_step_written_out_by_hand():
    module = moco(queue=5, momentum=0.9, temperature=0.5)
    generator = torch.Generator().manual_seed(3)
    view1, view2 = (
        torch.randn(2, 4, generator=generator, dtype=torch.float64),
        torch.randn(2, 4, generator=generator, dtype=torch.float64),
    )
    with torch.no_grad():
        module.encoder.linear.weight.mul_(2.0)  # query and key encoders now differ
    query_weight, query_bias = (
        module.encoder.linear.weight.detach().clone(),
        module.encoder.linear.bias.detach().clone(),
    )
    key_weight = 0.9 * module.key_encoder.linear.weight.detach() + 0.1 * query_weight
    key_bias = 0.9 * module.key_encoder.linear.bias.detach() + 0.1 * query_bias
    negatives = module.queue.clone()

    loss = module.loss(view1, view2)

    queries = F.normalize(view1 @ query_weight.T + query_bias, dim=1)
    keys = F.normalize(view2 @ key_weight.T + key_bias, dim=1)  # after the momentum update
    assert loss.item() == pytest.approx(naive_info_nce(queries, keys, negatives, 0.5), rel=1e-10)
    assert torch.allclose(module.queue[:2], keys, atol=1e-12) and torch.equal(module.queue[2:], negatives[2:])
    assert module.queue_pointer.item() == 2
    loss.backward()  # the queue was copied before enqueue overwrote it
    assert module.encoder.linear.weight.grad is not None and module.key_encoder.linear.weight.grad is None


def test_the_queue_and_key_encoder_travel_with_the_state_dict():
    module = moco()
    module.enqueue(sphere(3, 3, 4))
    state = module.state_dict()
    assert {"queue", "queue_pointer", "key_encoder.linear.weight"} <= set(state)
    other = moco()
    other.load_state_dict(state)
    assert torch.equal(other.queue, module.queue) and other.queue_pointer.item() == 3
