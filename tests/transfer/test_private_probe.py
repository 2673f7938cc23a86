"""DP-RandP's private linear probing (dpvip.transfer.private_probe): the private mean's noise
has the calibrated std, the exact GDP composition agrees with dp-accounting's PLD and gives
the paper's Table 23 epsilons, calibration hits its target, one step equals a naive
reference, train and test are centred on the same private mean, the probe learns, and bad
settings are refused in one line."""

import math

import dp_accounting
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import chi2

from dpvip.errors import DpvipInputError
from dpvip.privacy.clipping import CLIP_EPSILON
from dpvip.privacy.noise import gaussian_noise, noise_stream
from dpvip.privacy.randomness import RunRandomness
from dpvip.transfer.private_probe import (
    CENTRE,
    PrivateProbeSettings,
    calibrate,
    composed_epsilon,
    fit_probe,
    normalise,
    private_mean,
    train_probe,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")

TABLE23_DELTA = 7.8e-7


def blobs(
    n: int, width: int, classes: int, seed: int, separation: float = 3.0, offset: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, width) features of `classes` Gaussian blobs (fixed centres, all shifted by
    `offset` per coordinate), labels (n,)."""
    centres = torch.randn(classes, width, generator=torch.Generator().manual_seed(99)) * separation / math.sqrt(width)
    labels = torch.arange(n) % classes
    noise = torch.randn(n, width, generator=torch.Generator().manual_seed(seed)) / math.sqrt(width)
    return centres[labels] + noise + offset, labels


def test_private_mean_noise_has_the_calibrated_std():
    n, width, norm, sigma, draws = 100, 50, 50.0, 2.0, 2000
    features = normalise(torch.randn(n, width, generator=torch.Generator().manual_seed(0)), norm)
    true = features.mean(0)
    errors = torch.stack(
        [
            private_mean(features, norm, sigma, noise_stream(RunRandomness.seeded(seed), 0, torch.device("cpu"))) - true
            for seed in range(draws)
        ]
    ).double()
    samples, std = errors.numel(), sigma * norm / n  # the mean's std: sigma C / n = 1
    # sum of squares / std^2 is chi-square with `samples` degrees of freedom
    low, high = (math.sqrt(chi2.ppf(p, samples) / samples) for p in (1e-4, 1 - 1e-4))
    ratio = float(errors.square().mean().sqrt()) / std
    assert low < ratio < high and 0.97 < low and high < 1.03
    assert abs(float(errors.mean())) < 5 * std / math.sqrt(samples)


def test_private_mean_clips_every_row_to_the_feature_norm():
    """The sum's sensitivity is C_f exactly: a row of any norm adds at most C_f to it."""
    norm = 50.0
    features = normalise(torch.randn(8, 30, generator=torch.Generator().manual_seed(1)), norm)
    # rows of norm 100 are clipped back to norm 50: the same mean as the normalised rows
    torch.testing.assert_close(private_mean(features * 2, norm, 0.0, None), features.mean(0))
    huge = torch.full((1, 30), 1e6)
    assert float(torch.linalg.vector_norm(private_mean(huge, norm, 0.0, None))) <= norm
    # rows already normalised (up to float32 rounding above C_f) stay within C_f in the sum
    ones = torch.ones(1000, 1) * norm * (1 + 1e-6)
    assert float(private_mean(ones, norm, 0.0, None).max()) <= norm


@pytest.mark.parametrize(
    "sigma_mean, sigma_sgd, steps", [(71.0, 43.0, 100), (14.0, 9.33, 200), (None, 3.0, 10), (2.0, 5.0, 1)]
)
def test_composed_epsilon_equals_dp_accounting_pld(sigma_mean, sigma_sgd, steps):
    events = [dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma_sgd), steps)]
    if sigma_mean is not None:
        events.insert(0, dp_accounting.GaussianDpEvent(sigma_mean))
    accountant = dp_accounting.pld.PLDAccountant()
    accountant.compose(dp_accounting.ComposedDpEvent(events))
    reference = accountant.get_epsilon(TABLE23_DELTA)
    assert composed_epsilon(sigma_mean, sigma_sgd, steps, TABLE23_DELTA) == pytest.approx(reference, rel=1e-2)


def test_the_papers_table23_noise_gives_epsilon_1_and_8():
    low = composed_epsilon(71.0, 43.0, 100, TABLE23_DELTA)
    high = composed_epsilon(14.0, 9.33, 200, TABLE23_DELTA)
    print(f"Table 23: (71, 43, T=100) -> epsilon {low:.4f}; (14, 9.33, T=200) -> epsilon {high:.4f}")
    assert low == pytest.approx(1.0, abs=0.01) and high == pytest.approx(8.0, abs=0.02)  # measured 0.9958, 7.9914


@pytest.mark.parametrize("ratio", [None, 1.5, 71 / 43])
@pytest.mark.parametrize("epsilon", [1.0, 8.0])
def test_calibration_hits_the_target_epsilon(ratio, epsilon):
    settings = PrivateProbeSettings(
        epsilon=epsilon, delta=TABLE23_DELTA, steps=100, feature_norm=50.0, sigma_ratio=ratio
    )
    found = calibrate(settings)
    assert found["epsilon"] == pytest.approx(epsilon, rel=1e-6)
    assert composed_epsilon(found["sigma_mean"], found["sigma_sgd"], 100, TABLE23_DELTA) == pytest.approx(
        epsilon, rel=1e-6
    )
    if ratio is None:
        assert found["sigma_mean"] is None and found["sigma_sgd"] == pytest.approx(10 / found["mu"])
    else:
        assert found["sigma_mean"] == pytest.approx(ratio * found["sigma_sgd"])
    given = calibrate(
        PrivateProbeSettings(
            epsilon=None,
            noise_multiplier=found["sigma_sgd"],
            delta=TABLE23_DELTA,
            steps=100,
            feature_norm=50.0,
            sigma_ratio=ratio,
        )
    )
    assert given.keys() == found.keys() and (given["sigma_mean"] is None) == (ratio is None)
    assert all(given[key] == pytest.approx(found[key], rel=1e-9) for key in found if found[key] is not None)


def test_one_step_equals_a_naive_reference_on_centred_features(tmp_path):
    n, width, classes, lr, seed = 24, 5, 3, 10.0, 4
    train, labels = blobs(n, width, classes, seed=1, offset=2.0)
    test, _ = blobs(10, width, classes, seed=2, offset=2.0)
    settings = PrivateProbeSettings(
        epsilon=4.0, delta=1e-5, steps=1, lr=lr, feature_norm=3.0, sigma_ratio=1.5, seed=seed, micro_batch=5
    )
    randomness = RunRandomness.secret(tmp_path)
    probe, inputs, privacy = fit_probe(train, labels, test, classes, settings, randomness)
    prepared_test = inputs(test.clone())  # what the probe sees of the test features
    assert privacy["sigma_mean"] == pytest.approx(1.5 * privacy["sigma_sgd"]) and privacy["accountant"].startswith(
        "gdp"
    )
    # normalise, then centre train AND test on one private mean of the train features
    normed = normalise(train, 3.0)
    mean = private_mean(normed, 3.0, privacy["sigma_mean"], noise_stream(randomness, 0, torch.device("cpu"), CENTRE))
    assert float((mean - normed.mean(0)).norm()) > 1e-3  # noisy
    assert torch.allclose(prepared_test, normalise(test, 3.0) - mean, atol=1e-6)
    centred = normed - mean
    total = torch.zeros(classes, width)
    for xi, yi in zip(centred, labels):  # zero weights, no bias: every example's gradient alone
        w = torch.zeros(classes, width, requires_grad=True)
        grad = torch.autograd.grad(F.cross_entropy((xi @ w.T)[None], yi[None]), w)[0]
        total += grad * min(1.0, 1.0 / (float(grad.norm()) + CLIP_EPSILON))
    generator = noise_stream(randomness, 0, torch.device("cpu"))
    noise = gaussian_noise((classes * width,), privacy["sigma_sgd"], generator).view(classes, width)
    assert probe.bias is None
    assert torch.allclose(probe.weight.detach(), -lr * (total + noise) / n, rtol=1e-5, atol=1e-6)  # SGD's first step


@pytest.mark.parametrize("centring", [{}, {"feature_norm": 50.0}, {"feature_norm": 50.0, "sigma_ratio": 1.5}])
def test_the_probe_learns_separable_features(centring):
    train, labels = blobs(300, 20, 3, seed=5, offset=1.0)
    test, test_labels = blobs(300, 20, 3, seed=6, offset=1.0)
    for epsilon in (8.0, None):
        result = train_probe(
            train,
            labels,
            test,
            test_labels,
            3,
            PrivateProbeSettings(epsilon=epsilon, delta=1e-5, steps=20, randomness="seeded", **centring),
        )
        print(centring, epsilon, result["accuracy"])
        assert result["accuracy"] > 80.0  # chance: 33%
        assert (result["privacy"] is None) == (epsilon is None)


def test_result_is_json_able_and_deterministic_when_seeded_and_not_when_secret(tmp_path):
    import json

    train, labels = blobs(60, 6, 3, seed=7)
    settings = PrivateProbeSettings(epsilon=2.0, delta=1e-5, steps=5, feature_norm=10.0, sigma_ratio=2.0)
    seeded = PrivateProbeSettings(**(settings.__dict__ | {"randomness": "seeded"}))
    first, second = (train_probe(train, labels, train, labels, 3, seeded) for _ in range(2))
    first.pop("seconds"), second.pop("seconds")
    assert json.loads(json.dumps(first)) == first == second
    assert first["privacy"]["epsilon"] == pytest.approx(2.0) and first["privacy"]["steps"] == 5
    # two secret runs of the same settings: two keys, other noise
    runs = [
        fit_probe(train, labels, train, 3, settings, RunRandomness.secret(tmp_path / run))[0].weight for run in "ab"
    ]
    assert not torch.equal(*runs)
    with pytest.raises(DpvipInputError, match="needs a private work folder"):
        fit_probe(train, labels, train, 3, settings)


X, Y = blobs(10, 4, 2, seed=8)


@pytest.mark.parametrize(
    "change, features, match",
    [
        ({"noise_multiplier": 3.0}, None, "not both"),
        ({"epsilon": 0.0}, None, "epsilon 0.0"),
        ({"steps": 0}, None, "steps 0"),
        ({"sigma_ratio": 1.5}, None, "sigma_ratio 1.5 .*feature_norm"),
        ({"feature_norm": -1.0}, None, "feature_norm -1.0"),
        ({"delta": 1.0}, None, "delta 1.0"),
        ({}, (X, Y + 1, X, Y), "train label 2 is outside 0..1"),
        ({}, (X, Y, X[:, :3], Y), "width 4, test features 3"),
        ({}, (X[None], Y, X, Y), r"\(n, d\), not \(1, 10, 4\)"),
    ],
)
def test_bad_settings_and_features_are_refused_in_one_line(change, features, match):
    train, labels, test, test_labels = features or (X, Y, X, Y)
    with pytest.raises(DpvipInputError, match=match) as err:
        train_probe(
            train, labels, test, test_labels, 2, PrivateProbeSettings(**({"epsilon": 1.0, "delta": 1e-5} | change))
        )
    assert "\n" not in str(err.value)
