"""Mehta et al.'s last-layer DP fine-tuning (dpvip.transfer.head): one full-batch DP-Adam
step from zero is a sign step of an independently built noisy gradient, DP-LAMB's first
step is DP-Adam's and its later steps carry the trust ratio, a subsampled run equals a
naive per-example loop, Poisson batches have mean q n, the head learns, and bad settings
are refused in one line."""

import math

import numpy as np
import pytest

import torch
import torch.nn.functional as F

from dpvip.per_example import PER_EXAMPLE, read_correctness

from dpvip.errors import DpvipInputError
from dpvip.privacy import gaussian
from dpvip.privacy.clipping import CLIP_EPSILON
from dpvip.privacy.noise import gaussian_noise, noise_stream
from dpvip.privacy.randomness import RunRandomness
from dpvip.privacy.sampling import PoissonBatches
from dpvip.transfer.head import HeadSettings, fit_head, lr_factor, make_head, train_head

pytestmark = pytest.mark.usefixtures("torch_one_thread")

ADAM_EPS = 1e-8  # make_optimizer's


def blobs(
    n: int, width: int, classes: int, seed: int, views: int = 1, separation: float = 3.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(views, n, width) features of `classes` Gaussian blobs (fixed centres), labels (n,)."""
    centres = torch.randn(classes, width, generator=torch.Generator().manual_seed(99)) * separation / math.sqrt(width)
    labels = torch.arange(n) % classes
    noise = torch.randn(views, n, width, generator=torch.Generator().manual_seed(seed)) / math.sqrt(width)
    return centres[labels] + noise, labels


def per_example_gradients(
    weight: torch.Tensor, bias: float, x: torch.Tensor, y: torch.Tensor, classes: int
) -> list[torch.Tensor]:
    """Each example's gradient of the one-vs-all sigmoid loss w.r.t. the weights, one at a time."""
    grads = []
    for xi, yi in zip(x, y):
        w = weight.detach().clone().requires_grad_(True)
        logits = xi @ w.T + bias
        loss = F.binary_cross_entropy_with_logits(logits, F.one_hot(yi, classes).float(), reduction="sum")
        grads.append(torch.autograd.grad(loss, w)[0])
    return grads


def clipped_sum(grads: list[torch.Tensor], clip_norm: float) -> torch.Tensor:
    return sum(g * min(1.0, clip_norm / (float(g.norm()) + CLIP_EPSILON)) for g in grads)


def noise_draw(
    randomness: RunRandomness, step: int, sigma: float, clip_norm: float, shape: tuple[int, int]
) -> torch.Tensor:
    generator = noise_stream(randomness, step, torch.device("cpu"))
    return gaussian_noise((shape[0] * shape[1],), sigma * clip_norm, generator).view(shape)


def test_one_full_batch_dp_adam_step_from_zero_is_a_sign_step():
    n, width, classes, clip = 40, 6, 3, 2.5
    x, y = blobs(n, width, classes, seed=1)
    settings = HeadSettings(
        optimizer="adam", lr=0.05, batch_fraction=1.0, epochs=1, epsilon=8.0, delta=1e-5, clip_norm=clip, seed=7
    )
    randomness = RunRandomness.seeded(7)
    head, record = fit_head(x, y, classes, settings, randomness=randomness)
    sigma = record["privacy"]["noise_multiplier"]
    assert record["steps"] == 1 and record["batch_sizes"] == [n]
    assert sigma == pytest.approx(
        1 / gaussian.mu_for_epsilon(8.0, 1e-5), rel=1e-9
    )  # q = 1: the exact Gaussian mechanism
    grads = per_example_gradients(torch.zeros(classes, width), -10.0, x[0], y, classes)
    norms = torch.stack([g.norm() for g in grads])
    assert (norms > clip).any() and (norms < clip).any()  # both clipped and unclipped examples
    noisy = (clipped_sum(grads, clip) + noise_draw(randomness, 0, sigma, clip, (classes, width))) / n
    weight = head.weight.detach()
    assert torch.allclose(weight, -0.05 * noisy / (noisy.abs() + ADAM_EPS), rtol=1e-5, atol=1e-9)
    assert torch.allclose(weight, -0.05 * noisy.sign(), atol=0.05 * 1e-3)
    assert torch.equal(head.bias.detach(), torch.full((classes,), -10.0)) and not head.bias.requires_grad


def test_dp_lamb_first_step_is_dp_adams_then_the_trust_ratio_scales_its_steps():
    x, y = blobs(30, 5, 3, seed=2)
    common = {"lr": 0.05, "batch_fraction": 1.0, "epsilon": 8.0, "delta": 1e-5, "seed": 3}
    same = RunRandomness.seeded(3)  # one noise draw for both
    lamb, _ = fit_head(x, y, 3, HeadSettings(optimizer="lamb", epochs=1, **common), randomness=same)
    adam, _ = fit_head(x, y, 3, HeadSettings(optimizer="adam", epochs=1, **common), randomness=same)
    assert torch.allclose(lamb.weight, adam.weight, rtol=1e-6, atol=0)  # trust ratio 1 at zero weights
    # Later steps (optax's LAMB): step norm lr * ||w|| exactly, whatever the Adam direction.
    plain = common | {"epsilon": None}
    first, _ = fit_head(x, y, 3, HeadSettings(optimizer="lamb", epochs=1, **plain))
    second, _ = fit_head(x, y, 3, HeadSettings(optimizer="lamb", epochs=2, **plain))
    step = (second.weight - first.weight).detach().norm()
    assert float(step) == pytest.approx(0.05 * float(first.weight.detach().norm()), rel=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [8.0, None])
def test_a_subsampled_run_equals_a_naive_per_example_loop(epsilon):
    n, width, classes, views, q, lr, clip, seed = 16, 4, 3, 2, 0.5, 0.5, 1.0, 5
    x, y = blobs(n, width, classes, seed=3, views=views)
    settings = HeadSettings(
        optimizer="sgd",
        momentum=0.0,
        lr=lr,
        batch_fraction=q,
        epochs=2,
        epsilon=epsilon,
        delta=1e-5,
        clip_norm=clip,
        accountant="rdp",
        seed=seed,
        micro_batch=3,
    )
    randomness = RunRandomness.seeded(seed)
    head, record = fit_head(x, y, classes, settings, randomness=randomness)
    steps = record["steps"]
    assert steps == 4 and record["sample_rate"] == q
    sampler = PoissonBatches(n, q, steps, randomness)
    weight, sizes = torch.zeros(classes, width), []
    for step in range(steps):
        chosen = torch.from_numpy(sampler.indices(step))
        view = min(step // 2, views - 1)  # epoch floor(step * q)
        grads = per_example_gradients(weight, -10.0, x[view][chosen], y[chosen], classes)
        if epsilon is None:
            gradient = sum(grads) / max(1, len(grads))
        else:
            sigma = record["privacy"]["noise_multiplier"]
            gradient = (clipped_sum(grads, clip) + noise_draw(randomness, step, sigma, clip, (classes, width))) / (
                q * n
            )
        weight = weight - lr * gradient
        sizes.append(len(chosen))
    assert record["batch_sizes"] == sizes and len(set(sizes)) > 1
    assert torch.allclose(head.weight.detach(), weight, rtol=1e-5, atol=1e-6)


def test_realised_poisson_batches_have_mean_q_n():
    n, q = 400, 0.05
    x, y = blobs(n, 3, 2, seed=4)
    record = train_head(
        x,
        y,
        x[0],
        y,
        2,
        HeadSettings(optimizer="sgd", lr=0.1, batch_fraction=q, epochs=20, epsilon=8.0, accountant="rdp", delta=1e-5),
        randomness=RunRandomness.seeded(0),
    )
    sizes = np.array(record["batch_sizes"])
    assert record["steps"] == len(sizes) == 400
    expected, spread = q * n, math.sqrt(n * q * (1 - q))
    assert abs(sizes.mean() - expected) < 5 * spread / math.sqrt(len(sizes))
    assert sizes.std() == pytest.approx(spread, rel=0.2)


def test_the_head_learns_separable_features_and_zero_init_beats_a_huge_one():
    train, labels = blobs(300, 20, 3, seed=5)
    test, test_labels = blobs(300, 20, 3, seed=6)
    single_step = {"optimizer": "adam", "lr": 0.1, "batch_fraction": 1.0, "epochs": 1, "randomness": "seeded"}
    runs = {
        "dp": HeadSettings(epsilon=8.0, **single_step),
        "plain": HeadSettings(epsilon=None, **single_step),
        "dp subsampled": HeadSettings(
            optimizer="lamb",
            lr=0.1,
            batch_fraction=0.2,
            epochs=5,
            epsilon=8.0,
            accountant="rdp",
            schedule="cosine",
            warmup_epochs=1.0,
            randomness="seeded",
        ),
        "dp huge init": HeadSettings(epsilon=8.0, init_scale=100.0, **single_step),
    }
    results = {name: train_head(train, labels, test[0], test_labels, 3, settings) for name, settings in runs.items()}
    accuracy = {name: result["accuracy"] for name, result in results.items()}
    print(accuracy)
    for result in results.values():  # each test example's correctness, kept for paired comparisons
        bits, test_set = read_correctness(result[PER_EXAMPLE])
        assert 100 * bits.mean() == pytest.approx(result["accuracy"]) and test_set.startswith("test:")
    assert min(accuracy["dp"], accuracy["plain"], accuracy["dp subsampled"]) > 80.0  # chance: 33%
    assert accuracy["dp"] >= accuracy["dp huge init"]


def test_result_is_json_able_and_deterministic():
    import json

    x, y = blobs(50, 4, 2, seed=7, views=2)
    settings = HeadSettings(
        optimizer="lamb",
        lr=0.01,
        batch_fraction=0.25,
        epochs=2,
        epsilon=4.0,
        accountant="rdp",
        delta=1e-5,
        micro_batch=7,
        randomness="seeded",
    )
    first, second = train_head(x, y, x[0], y, 2, settings), train_head(x, y, x[0], y, 2, settings)
    for result in (first, second):  # the steps are timed within the whole run
        assert 0 < result.pop("train_seconds") < result.pop("seconds")
    assert json.loads(json.dumps(first)) == first == second
    assert first["privacy"]["steps_done"] == first["steps"] == 8 and first["settings"]["optimizer"] == "lamb"
    assert first["device"] == "cpu" and first["threads"] == torch.get_num_threads()


def test_init_views_and_schedule():
    head = make_head(400, 50, HeadSettings(init_scale=2.0, seed=1))
    assert float(head.weight.detach().std()) == pytest.approx(2.0 / math.sqrt(400), rel=0.03)
    assert not head.bias.requires_grad and torch.all(head.bias == -10.0)
    assert torch.all(make_head(4, 3, HeadSettings()).weight == 0)
    assert [HeadSettings(batch_fraction=0.1).view(step, 3) for step in (0, 9, 10, 19, 20, 40)] == [0, 0, 1, 1, 2, 2]
    assert [lr_factor(step, 6, 2, "linear") for step in range(6)] == [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]
    assert [lr_factor(step, 4, 0, "cosine") for step in range(4)] == pytest.approx(
        [1.0, 0.5 + 0.5 * math.cos(math.pi / 4), 0.5, 0.5 - 0.5 * math.cos(math.pi / 4)]
    )
    assert lr_factor(3, 4, 0, "constant") == 1.0


X, Y = blobs(10, 4, 2, seed=8)


@pytest.mark.parametrize(
    "change, features, match",
    [
        ({"batch_fraction": 0.0}, None, "batch_fraction 0.0"),
        ({"batch_fraction": 1.5}, None, "batch_fraction 1.5"),
        ({"epochs": 0}, None, "epochs 0"),
        ({"epsilon": 0.0}, None, "epsilon 0.0"),
        ({"epsilon": -1.0}, None, "epsilon -1.0"),
        ({"optimizer": "rmsprop"}, None, "'rmsprop'"),
        ({"schedule": "step"}, None, "'step'"),
        ({}, (X, Y + 1, X[0], Y), "train label 2 is outside 0..1"),
        ({}, (X, Y, X[0], Y - 1), "test label -1 is outside 0..1"),
        ({}, (X, Y, X[0, :, :3], Y), "width 4, test features 3"),
    ],
)
def test_bad_settings_and_features_are_refused_in_one_line(change, features, match):
    train, labels, test, test_labels = features or (X, Y, X[0], Y)
    with pytest.raises(DpvipInputError, match=match) as err:
        train_head(train, labels, test, test_labels, 2, HeadSettings(**change))
    assert "\n" not in str(err.value)
