"""The linear probe: BatchNorm without affine parameters + an N(0, 0.01^2) head, trained with
LARS that adapts the weight matrix only; it separates separable features, learns nothing from
labels independent of the features, and is deterministic for a seed."""

from dataclasses import replace

import pytest

from dpvip.per_example import PER_EXAMPLE, read_correctness
import torch
from timm.optim import Lars

from dpvip.errors import DpvipInputError
from dpvip.evaluate.linear_probe import (
    LinearProbe,
    ProbeSettings,
    best_of_grid,
    lars,
    probe_grid,
    top1_accuracy,
    train_probe,
)
from dpvip.selection import TEST, Selection, validation_split

CLASSES, DIM = 10, 32
SETTINGS = ProbeSettings(epochs=30, warmup_epochs=3, batch_size=128, blr=16.0)


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def clusters(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n points of 10 balanced Gaussian clusters in 32-d: unit noise around centres ~ N(0, 3^2)
    per coordinate (centres about 24 apart), the same centres for every seed."""
    centres = torch.randn(CLASSES, DIM, generator=torch.Generator().manual_seed(0)) * 3.0
    generator = torch.Generator().manual_seed(seed)
    labels = (torch.arange(n) % CLASSES)[torch.randperm(n, generator=generator)]
    return centres[labels] + torch.randn(n, DIM, generator=generator), labels


@pytest.fixture(scope="module")
def separable():
    return clusters(1000, seed=1), clusters(500, seed=2)


def test_separable_features_are_probed_to_at_least_95_percent(separable):
    train, test = separable
    probe = train_probe(*train, CLASSES, SETTINGS)
    assert not probe.training
    assert top1_accuracy(probe, *test) >= 0.95


def test_labels_independent_of_the_features_give_chance_accuracy(separable):
    (features, labels), (test_features, test_labels) = separable
    generator = torch.Generator().manual_seed(9)
    shuffled = labels[torch.randperm(len(labels), generator=generator)]
    probe = train_probe(features, shuffled, CLASSES, SETTINGS)
    # The test labels are shuffled too, so they are independent of the features and of the
    # probe: whatever it predicts, each of the 500 test points is right with probability 0.1,
    # a standard deviation of sqrt(0.1 * 0.9 / 500) = 0.013 (less for a balanced permutation).
    # 0.06 is 4.5 of those (p < 1e-5). Against the true test labels the spread would be far
    # larger: a probe trained on shuffled labels still predicts by cluster, so whole clusters
    # of 50 points are right or wrong together (over 200 shuffles: sd 0.07, max 0.28).
    test_shuffled = test_labels[torch.randperm(len(test_labels), generator=generator)]
    assert top1_accuracy(probe, test_features, test_shuffled) <= 0.1 + 0.06
    # The same probe trained on the true labels is far above that bound (the control).
    assert top1_accuracy(train_probe(features, labels, CLASSES, SETTINGS), test_features, test_labels) >= 0.95


def test_top1_accuracy_counts_argmax_agreement():
    probe = LinearProbe(2, 3)
    with torch.no_grad():
        probe.head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]]))
    probe.norm.running_mean.zero_()
    probe.norm.running_var.fill_(1.0)
    features = torch.tensor([[5.0, 0.0], [0.0, 5.0], [-5.0, -5.0], [5.0, 0.0]])  # argmax 0, 1, 2, 0
    assert top1_accuracy(probe, features, torch.tensor([0, 1, 2, 1])) == pytest.approx(0.75)


def test_probe_grid_on_test_returns_the_best_base_lr_and_every_grid_value(separable):
    """`selection: test` (the paper's practice) is the old grid: every probe on all of train,
    the best test accuracy reported, and the result says how it was chosen."""
    train, test = separable
    settings = replace(SETTINGS, epochs=5)
    blrs = [1e-6, 16.0, 1e-3]  # the best in the middle, so neither first nor last wins by position
    result = probe_grid(train, test, CLASSES, settings, blrs, selection=TEST)
    assert set(result["grid"]) == set(blrs)
    for blr in blrs:  # each grid value is that blr's probe, trained alone (training is deterministic)
        assert result["grid"][blr] == top1_accuracy(train_probe(*train, CLASSES, replace(settings, blr=blr)), *test)
    assert result["blr"] == 16.0 == max(result["grid"], key=result["grid"].get)
    assert result["accuracy"] == result["grid"][16.0] > max(result["grid"][1e-6], result["grid"][1e-3])
    assert result["selection"]["mode"] == "test" and "optimistic" in result["selection"]["label"]
    assert "validation" not in result and "split" not in result


def test_probe_grid_picks_on_validation_accuracy_not_on_test_accuracy(separable):
    """A test split whose labels are shifted by one class: the well-trained probe (blr 16) is
    right on the held-out share of train and wrong on nearly every test point, the untrained
    one (blr 1e-6) about as often right as chance on both. Chosen on validation: blr 16 and its
    (low) test accuracy; chosen on test: blr 1e-6. Each probe trains on the kept 80% only."""
    train, (test_features, test_labels) = separable
    test = (test_features, (test_labels + 1) % CLASSES)
    settings = SETTINGS
    blrs = [1e-6, 16.0]
    picked = probe_grid(train, test, CLASSES, settings, blrs, selection=Selection(fraction=0.2, seed=3))
    on_test = probe_grid(train, test, CLASSES, settings, blrs, selection=TEST)
    assert on_test["blr"] == 1e-6 and on_test["grid"][1e-6] > on_test["grid"][16.0]
    assert picked["blr"] == 16.0 and picked["validation"][16.0] > 0.9 > picked["validation"][1e-6]
    assert picked["grid"][1e-6] > picked["grid"][16.0] == picked["accuracy"]  # the test-best was not taken
    assert picked["validation_accuracy"] == picked["validation"][16.0]
    assert PER_EXAMPLE not in picked  # no test set named: no per-example record
    named = probe_grid(train, test, CLASSES, settings, blrs, selection=TEST, test_set="shifted")
    bits, test_set = read_correctness(named[PER_EXAMPLE])  # the chosen point's, for paired comparisons
    assert bits.mean() == pytest.approx(named["accuracy"]) and test_set.startswith("shifted:")
    assert named["grid"] == on_test["grid"]
    assert picked["selection"] == {"mode": "validation", "fraction": 0.2, "seed": 3, "stratified": True}
    assert picked["split"] == {"train": 800, "validation": 200, "test": 500}
    kept, held = validation_split(train[1].numpy(), 0.2, 3)
    kept, held = torch.from_numpy(kept), torch.from_numpy(held)
    probe = train_probe(train[0][kept], train[1][kept], CLASSES, replace(settings, blr=16.0))
    assert picked["accuracy"] == top1_accuracy(probe, *test)
    assert picked["validation"][16.0] == top1_accuracy(probe, train[0][held], train[1][held])


def test_best_of_grid_chooses_by_the_selection_mode():
    points = {0.1: {"validation": 0.9, "test": 0.5}, 0.2: {"validation": 0.6, "test": 0.8}}
    result = best_of_grid(lambda value, saved: points[value], list(points), "lr", selection=Selection())
    assert (result["lr"], result["accuracy"], result["validation_accuracy"]) == (0.1, 0.5, 0.9)
    assert result["grid"] == {0.1: 0.5, 0.2: 0.8} and result["validation"] == {0.1: 0.9, 0.2: 0.6}
    tested = best_of_grid(lambda value, saved: points[value]["test"], list(points), "lr")
    assert (tested["lr"], tested["accuracy"], tested["selection"]["mode"]) == (0.2, 0.8, "test")
    with pytest.raises(DpvipInputError, match="validation accuracy"):
        best_of_grid(lambda value, saved: points[value]["test"], list(points), "lr", selection=Selection())


def test_batchnorm_has_no_affine_parameters_and_the_head_starts_at_n_0_001():
    torch.manual_seed(0)
    probe = LinearProbe(512, 100)
    assert not probe.norm.affine and probe.norm.weight is None and probe.norm.bias is None
    assert [name for name, _ in probe.named_parameters()] == ["head.weight", "head.bias"]
    weight = probe.head.weight
    # 51,200 draws: the sample std of N(0, 0.01^2) is within 1% (about 3 standard errors);
    # nn.Linear's default init would give 1/sqrt(3 * 512) = 0.026.
    assert weight.std().item() == pytest.approx(0.01, rel=0.01)
    assert abs(weight.mean().item()) < 0.01 * 5 / len(weight.flatten()) ** 0.5
    assert torch.equal(probe.head.bias, torch.zeros(100))


def test_lars_adapts_the_weight_matrix_and_not_the_bias():
    probe = LinearProbe(8, 3)
    optimizer = lars(probe, 0.5, SETTINGS)
    assert isinstance(optimizer, Lars)
    weights, biases = optimizer.param_groups
    assert weights["params"] == [probe.head.weight] and weights["always_adapt"] is True
    assert biases["params"] == [probe.head.bias] and biases["always_adapt"] is False
    assert weights["weight_decay"] == SETTINGS.weight_decay and biases["weight_decay"] == 0.0
    assert all(
        group["lr"] == 0.5 and group["momentum"] == 0.9 and group["trust_coeff"] == 0.001 for group in (weights, biases)
    )


def test_a_lars_step_is_sgd_momentum_on_the_bias_and_trust_scaled_on_the_weight():
    torch.manual_seed(0)
    probe = LinearProbe(8, 3)
    with torch.no_grad():
        probe.head.bias.copy_(torch.tensor([0.5, -1.0, 2.0]))  # non-zero: a zero norm would hide the trust ratio
    lr = 0.5
    optimizer = lars(probe, lr, replace(SETTINGS, weight_decay=0.0))
    # Plain SGD with momentum on a copy of the bias, fed the probe's own bias gradient.
    bias = torch.nn.Parameter(probe.head.bias.detach().clone())
    sgd = torch.optim.SGD([bias], lr=lr, momentum=0.9)
    features, labels = torch.randn(16, 8), torch.randint(0, 3, (16,))
    for step in range(2):  # two steps, so the momentum buffer takes part
        weight_before = probe.head.weight.detach().clone()
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(probe(features), labels).backward()
        grad = probe.head.weight.grad.clone()
        bias.grad = probe.head.bias.grad.clone()
        optimizer.step()
        sgd.step()
        assert torch.allclose(probe.head.bias, bias, atol=1e-7, rtol=0)
        if step == 0:  # no momentum yet: the weight moves by lr * trust_coeff * |w| / |g| * g, not lr * g
            ratio = 0.001 * weight_before.norm() / grad.norm()
            assert torch.allclose(weight_before - probe.head.weight, lr * ratio * grad, atol=1e-9, rtol=1e-4)
            assert not torch.allclose(weight_before - probe.head.weight, lr * grad, atol=1e-6)


@pytest.mark.parametrize(
    "features, labels",
    [(torch.randn(10, 4), torch.zeros(9, dtype=torch.long)), (torch.randn(0, 4), torch.zeros(0, dtype=torch.long))],
)
def test_mismatched_or_empty_features_and_labels_are_refused(features, labels):
    with pytest.raises(DpvipInputError, match="as many labels as features"):
        train_probe(features, labels, CLASSES, SETTINGS)


@pytest.mark.parametrize("change", [{"epochs": 0}, {"batch_size": 0}, {"blr": 0.0}, {"blr": -1.0}])
def test_settings_out_of_range_are_refused(separable, change):
    with pytest.raises(DpvipInputError, match="linear probe needs epochs >= 1"):
        train_probe(*separable[0], CLASSES, replace(SETTINGS, **change))


def test_training_is_deterministic_for_a_seed(separable):
    train, _ = separable
    settings = replace(SETTINGS, epochs=3)
    first, again = train_probe(*train, CLASSES, settings), train_probe(*train, CLASSES, settings)
    other = train_probe(*train, CLASSES, replace(settings, seed=1))
    for name, value in first.state_dict().items():
        assert torch.equal(value, again.state_dict()[name]), name
    assert not torch.equal(first.head.weight, other.head.weight)


def test_an_augmented_probe_sees_new_views_through_the_frozen_encoder_each_batch(monkeypatch):
    from dpvip.evaluate import linear_probe
    from dpvip.evaluate.datasets import LabelledImages
    from dpvip.evaluate.features import FeatureChoice
    from dpvip.models import MAESettings
    from dpvip.models.mae import MaskedAutoencoder

    torch.manual_seed(0)
    mae = MaskedAutoencoder(MAESettings("pico", image_size=16, patch_size=4))
    images = torch.randn(8, 3, 16, 16)
    train = LabelledImages(images, torch.arange(8) % 2, 2, "tiny")
    seen = []
    encode = linear_probe.encoder_features
    monkeypatch.setattr(
        linear_probe,
        "encoder_features",
        lambda model, views, choice: seen.append(views) or encode(model, views, choice),
    )
    choice = FeatureChoice()
    probe = linear_probe.train_probe_augmented(
        mae, choice, train, ProbeSettings(epochs=2, warmup_epochs=0, batch_size=4, blr=1.0, augment=True)
    )
    assert probe.head.in_features == choice.width(64) and not mae.training
    assert len(seen) == 4 and all(views.shape == (4, 3, 16, 16) for views in seen)  # 2 epochs of 2 batches
    originals = {tuple(image.flatten()[:5].tolist()) for image in images}
    assert not any(tuple(view.flatten()[:5].tolist()) in originals for views in seen for view in views)  # cropped views
    assert all(p.grad is None for p in mae.parameters())  # the encoder stays frozen
