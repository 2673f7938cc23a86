"""The DP step (dpvip.privacy.step) and every training loop that takes its steps through it.

For each DP path (DP-MAE pre-training, DP fine-tuning, DP-RandP Phases II and III, Mehta et
al.'s head, DP-RandP's private probe), one real step of that path equals a naive reference:
one example at a time, its gradient clipped to C, summed, plus the same noise draw scaled by
sigma C, divided by q n, then the same optimizer update. The reference takes its batch from
the path's settings (q = B / n) and its sigma from the accountant (or the sigma the settings
give), never from the step or its ledger: halving sigma, or drawing at another rate, where a
path builds its step fails here. The draws themselves (which examples, which noise) come
from the run's randomness, its secret: every path here runs in `secret` mode.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import write_synthetic_index
from dpvip.errors import DpvipInputError
from dpvip.privacy import accounting, gaussian
from dpvip.privacy.clipping import CLIP_EPSILON, ClippedGradientSum
from dpvip.privacy.ledger import BudgetExceeded, PrivacyLedger
from dpvip.privacy.noise import gaussian_noise, noise_stream
from dpvip.privacy.randomness import RunRandomness
from dpvip.privacy.sampling import PoissonBatches, example_seed
from dpvip.privacy.step import DPStep

pytestmark = [
    pytest.mark.usefixtures("torch_one_thread"),
    # steps_seen wraps optimizer.step, which torch's lr schedulers warn about (nothing changes)
    pytest.mark.filterwarnings("ignore:Seems like `optimizer.step\\(\\)` has been overridden"),
]
CPU = torch.device("cpu")


# --- the naive reference ---------------------------------------------------------------------
def trainable(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def naive_gradient(
    model: nn.Module,
    example_losses: list,
    clip_norm: float,
    sigma: float,
    expected_batch: float,
    randomness: RunRandomness,
    step: int,
) -> list[torch.Tensor]:
    """(sum_i clip_C(grad l_i) + sigma C xi) / (q n), one example at a time, in float64; xi is
    the run's standard normal draw of that step, in the parameters' order."""
    params = trainable(model)
    total = [torch.zeros_like(p, dtype=torch.float64) for p in params]
    for loss_of in example_losses:
        grads = torch.autograd.grad(loss_of(model), params, allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]
        norm = math.sqrt(sum(float(g.double().square().sum()) for g in grads))
        factor = min(1.0, clip_norm / (norm + CLIP_EPSILON))
        for part, g in zip(total, grads):
            part += factor * g.double()
    sizes = [p.numel() for p in params]
    xi = gaussian_noise((sum(sizes),), 1.0, noise_stream(randomness, step, CPU))
    noise = [part.view_as(p) for part, p in zip(xi.split(sizes), params)]
    return [(part + sigma * clip_norm * n.double()) / expected_batch for part, n in zip(total, noise)]


@dataclass
class Seen:
    """One DPStep call as it happened: the model and optimizer state before it, the gradient
    handed to the optimizer, the parameters after."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    state: dict
    randomness: RunRandomness
    before: list[torch.Tensor]
    gradients: list[torch.Tensor] = field(default_factory=list)
    after: list[torch.Tensor] = field(default_factory=list)


@pytest.fixture
def steps_seen(monkeypatch) -> list[Seen]:
    """Records every DPStep call (behaviour unchanged: the real call runs in between)."""
    seen: list[Seen] = []
    real_call = DPStep.__call__

    def recording_call(self, step, micro_batches, unreadable=0):
        params = self.clipper.params
        record = Seen(
            copy.deepcopy(self.clipper.model),
            self.optimizer,
            copy.deepcopy(self.optimizer.state_dict()),
            self.randomness,
            [p.detach().clone() for p in params],
        )
        real_step = self.optimizer.step

        def step_and_record(*args, **kwargs):
            record.gradients = [p.grad.detach().clone() for p in params]
            return real_step(*args, **kwargs)

        self.optimizer.step = step_and_record
        try:
            report = real_call(self, step, micro_batches, unreadable)
        finally:
            del self.optimizer.step
        record.after = [p.detach().clone() for p in params]
        seen.append(record)
        return report

    monkeypatch.setattr(DPStep, "__call__", recording_call)
    return seen


def assert_step_is_the_reference(record: Seen, expected: list[torch.Tensor]) -> None:
    """The gradient the optimizer got is the reference's, and the update is the optimizer's
    (a fresh optimizer of the same kind and state, stepped on the gradient it got: Adam's first
    step is about lr sign(g), so an element whose gradient is near 0 would move its update by
    up to 2 lr within the gradient's tolerance; the gradient itself is checked just above)."""
    assert len(record.gradients) == len(expected)
    scale = max(float(g.abs().max()) for g in expected)
    for got, want in zip(record.gradients, expected):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5 * scale)
    params = [nn.Parameter(p.clone()) for p in record.before]
    optimizer = type(record.optimizer)(params)
    optimizer.load_state_dict(record.state)
    for param, gradient in zip(params, record.gradients):
        param.grad = gradient.clone()
    optimizer.step()
    for got, want in zip(record.after, params):
        torch.testing.assert_close(got, want.detach(), rtol=1e-4, atol=1e-6)


# --- the five DP paths, one real step each ---------------------------------------------------
def dp_mae_step(tmp_path, seen):
    from dpvip.data.images import collate_skipping_corrupt
    from dpvip.train.dp_mae import DPMAETraining
    from dpvip.plan.dp_pretrain import DPPretrainSettings

    index = write_synthetic_index(tmp_path / "data", "shaders", 64, 32, 64, options={"programs": 4})
    settings = DPPretrainSettings.from_config(
        {
            "image_size": 32,
            "patch_size": 4,
            "steps": 3,
            "batch_size": 16,
            "clip_norm": 0.05,
            "micro_batch": 6,
            "epsilon": 4.0,
        },
        "pico",
    )
    training = DPMAETraining(settings, index, tmp_path / "run", progress=False)
    randomness = training.dp_step.randomness
    q, n = 16 / 64, 64
    chosen = PoissonBatches(n, q, 3, randomness).indices(0)
    assert list(training.sampler.indices(0)) == list(chosen)  # the loader's batches are the reference's
    dataset = training.dataset()
    images, noise, _ = collate_skipping_corrupt(
        [dataset[(int(i), example_seed(randomness, 0, int(i)))] for i in chosen]
    )
    training.train_step(images, noise)
    sigma = accounting.noise_multiplier(q, 3, 4.0, 1 / (2 * n), "rdp").noise_multiplier
    losses = [
        lambda model, k=k: model(images[k : k + 1], noise[k : k + 1]).loss.float().sum() for k in range(len(chosen))
    ]
    return losses, settings.clip_norm, sigma, q * n


def dp_finetune_step(tmp_path, seen):
    from dpvip.evaluate.datasets import digits
    from dpvip.evaluate.dp_finetune import DPFinetuneSettings, train_dp_classifier
    from dpvip.models import MAESettings
    from dpvip.models.mae import MaskedAutoencoder

    train = digits(8)[0].subset(range(48))
    torch.manual_seed(0)
    mae = MaskedAutoencoder(MAESettings("pico", image_size=8, patch_size=4))
    settings = DPFinetuneSettings(
        batch_size=12, noise_multiplier=0.8, steps=2, warmup_steps=0, micro_batch=5, clip_norm=0.5
    )
    train_dp_classifier(mae, train, settings, tmp_path / "work", progress=False)
    chosen = PoissonBatches(48, 12 / 48, 2, seen[0].randomness).indices(0)
    images, labels = train.images[chosen], train.labels[chosen]
    losses = [
        lambda model, k=k: F.cross_entropy(model(images[k : k + 1]), labels[k : k + 1]) for k in range(len(chosen))
    ]
    return losses, settings.clip_norm, 0.8, 12.0


def dprandp_step(phase2_steps: int):
    def run(tmp_path, seen):
        from dpvip.randp.augmult import augmult_views
        from dpvip.randp.data import private_splits
        from dpvip.randp.private import PrivateTraining, fresh_network
        from dpvip.plan.dprandp_private import PrivateSettings

        train = private_splits("CIFAR-10", {"source": "digits", "validation_fraction": 0.1}, 8)[0]["train"].subset(
            range(200)
        )
        s = PrivateSettings(
            model="wrn10_1",
            epsilon=2.0,
            steps=3,
            phase2_steps=phase2_steps,
            lr_phase2=2.0,
            lr_phase3=0.5,
            batch_size=20,
            augmult=2,
            image_size=8,
            micro_batch=7,
            padding=2,
            momentum=0.9,
        )
        network = fresh_network(s.model, 10, s.seed)
        if phase2_steps == 0:  # the head starts at zero: give it weights, so every layer has a gradient
            torch.nn.init.normal_(network.classifier.weight, std=0.1)
        PrivateTraining(s, {"train": train}, network, tmp_path / "run", progress=False)._step()
        q, n = 20 / 200, 200
        chosen = PoissonBatches(n, q, 3, seen[0].randomness).indices(0)
        sigma = accounting.noise_multiplier(q, 3, 2.0, s.delta, "prv").noise_multiplier

        def loss(model, i):  # an example's loss: the mean over its augmented views
            views = augmult_views(train.images[[i]], [example_seed(seen[0].randomness, 0, i)], s.augmult, s.padding)
            return F.cross_entropy(model(views), train.labels[[i]].repeat(s.augmult))

        return [lambda model, i=int(i): loss(model, i) for i in chosen], s.clip_norm, sigma, q * n

    return run


def features(n: int = 40, width: int = 6, classes: int = 3, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % classes
    return torch.randn(n, width, generator=generator) + 2 * F.one_hot(labels, width).float(), labels


def head_step(tmp_path, seen):
    from dpvip.transfer.head import HeadSettings, fit_head, sigmoid_loss

    x, y = features()
    settings = HeadSettings(
        optimizer="lamb",
        lr=0.1,
        batch_fraction=0.25,
        epochs=0.5,
        epsilon=3.0,
        delta=1e-5,
        clip_norm=0.7,
        accountant="rdp",
        init_scale=1.0,
    )
    fit_head(x[None], y, 3, settings, randomness=RunRandomness.secret(tmp_path))
    chosen = PoissonBatches(40, 0.25, 2, seen[0].randomness).indices(0)
    sigma = accounting.noise_multiplier(0.25, 2, 3.0, 1e-5, "rdp").noise_multiplier
    losses = [lambda model, i=int(i): sigmoid_loss(model(x[i : i + 1]), y[i : i + 1]).sum() for i in chosen]
    return losses, 0.7, sigma, 0.25 * 40


def probe_step(tmp_path, seen):
    from dpvip.transfer.head import softmax_loss
    from dpvip.transfer.private_probe import PrivateProbeSettings, fit_probe

    x, y = features()
    settings = PrivateProbeSettings(epsilon=2.0, delta=1e-5, steps=3, lr=0.5, clip_norm=0.9)
    fit_probe(x, y, x[:4], 3, settings, RunRandomness.secret(tmp_path))
    sigma = math.sqrt(3) / gaussian.mu_for_epsilon(2.0, 1e-5)  # 3 full-batch Gaussian steps spend epsilon 2
    losses = [lambda model, i=i: softmax_loss(model(x[i : i + 1]), y[i : i + 1]).sum() for i in range(40)]
    return losses, 0.9, sigma, 40.0


PATHS = {
    "dp_mae": dp_mae_step,
    "dp_finetune": dp_finetune_step,
    "dprandp_phase2": dprandp_step(phase2_steps=1),
    "dprandp_phase3": dprandp_step(phase2_steps=0),
    "mehta_head": head_step,
    "dprandp_probe": probe_step,
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_one_step_of_each_dp_path_is_the_naive_reference(path, tmp_path, steps_seen):
    losses, clip_norm, sigma, expected_batch = PATHS[path](tmp_path, steps_seen)
    first = steps_seen[0]
    assert first.randomness.private, "the paths' settings default to secret randomness"
    assert 3 <= len(losses), "a batch of a few examples at least"
    assert_step_is_the_reference(
        first, naive_gradient(first.model, losses, clip_norm, sigma, expected_batch, first.randomness, 0)
    )


# --- DPStep itself ---------------------------------------------------------------------------
class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.hidden, self.out = nn.Linear(5, 4), nn.Linear(4, 3)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


def tiny_step(ledger: PrivacyLedger | None, clip_norm: float = 0.3, **extra):
    model = Tiny()
    clipper = ClippedGradientSum(model, clip_norm)
    optimizer = torch.optim.SGD(clipper.params, lr=0.1, momentum=0.9)
    return model, DPStep(clipper, optimizer, ledger, 50, SEEDED, **extra)


SEEDED = RunRandomness.seeded(7)
DATA = torch.randn(50, 5, generator=torch.Generator().manual_seed(1)), torch.arange(50) % 3


def micro_batches(model, chosen, size=4):
    x, y = DATA
    for start in range(0, len(chosen), size):
        part = torch.as_tensor(chosen[start : start + size])
        yield lambda part=part: F.cross_entropy(model(x[part]), y[part], reduction="none")


def test_steps_charge_the_ledger_and_equal_the_reference_then_refuse_past_the_budget(steps_seen):
    ledger = PrivacyLedger.calibrate("rdp", 0.2, 2, 2.0, 1e-5, 0.3)
    model, dp_step = tiny_step(ledger)
    x, y = DATA
    for step in range(2):
        chosen = dp_step.batch(step)
        assert list(chosen) == list(PoissonBatches(50, 0.2, 2, SEEDED).indices(step))
        report = dp_step(step, micro_batches(model, chosen))
        assert dp_step.ledger.steps_done == step + 1 and report.examples == len(chosen) > 0
        record = steps_seen[-1]
        losses = [lambda m, i=int(i): F.cross_entropy(m(x[i : i + 1]), y[i : i + 1]) for i in chosen]
        assert_step_is_the_reference(
            record, naive_gradient(record.model, losses, 0.3, ledger.noise_multiplier, 10.0, SEEDED, step)
        )
    with pytest.raises(BudgetExceeded):
        dp_step(2, micro_batches(model, dp_step.batch(1)))
    assert dp_step.ledger.steps_done == 2


def zero_losses(layer: nn.Linear, examples: int):
    """A micro-batch of `examples` whose losses (and so gradients) are 0: the step adds noise alone."""
    return lambda: layer(torch.ones(examples, layer.in_features)).sum(1) * 0.0


def test_the_noise_has_the_ledgers_std_over_q_n():
    """Examples whose losses are 0, so the gradient is the noise alone: N(0, (sigma C / (q n))^2)
    per coordinate."""
    ledger = PrivacyLedger("rdp", 0.2, 3.0, 0.3, 1e-5, 10.0, 5)
    layer = nn.Linear(100, 100)
    dp_step = DPStep(
        ClippedGradientSum(layer, 0.3), torch.optim.SGD(layer.parameters(), lr=1.0), ledger, 50, RunRandomness.seeded(3)
    )
    before = layer.weight.detach().clone()
    dp_step(0, [zero_losses(layer, len(dp_step.batch(0)))])
    update = (before - layer.weight.detach()).flatten()  # lr 1: minus the gradient
    std = 3.0 * 0.3 / (0.2 * 50)
    assert abs(float(update.std()) / std - 1) < 0.03 and abs(float(update.mean())) < 4 * std / 100


def test_without_a_ledger_it_clips_without_noise(steps_seen):
    model, dp_step = tiny_step(None, sample_rate=0.3, steps=1)
    chosen = dp_step.batch(0)
    dp_step(0, micro_batches(model, chosen))
    x, y = DATA
    record = steps_seen[-1]
    losses = [lambda m, i=int(i): F.cross_entropy(m(x[i : i + 1]), y[i : i + 1]) for i in chosen]
    assert_step_is_the_reference(record, naive_gradient(record.model, losses, 0.3, 0.0, 0.3 * 50, SEEDED, 0))


def test_the_realised_batches_have_mean_q_n():
    _, dp_step = tiny_step(None, sample_rate=0.2, steps=400)
    sizes = np.array([len(dp_step.batch(step)) for step in range(400)])
    assert abs(sizes.mean() - 10) < 4 * math.sqrt(50 * 0.2 * 0.8) / math.sqrt(400)


def test_a_clipper_with_another_norm_than_the_ledgers_is_refused():
    ledger = PrivacyLedger.calibrate("rdp", 0.2, 2, 2.0, 1e-5, 1.0)
    model, dp_step = tiny_step(ledger, clip_norm=0.3)
    with pytest.raises(DpvipInputError, match="not the ledger's"):
        dp_step(0, micro_batches(model, dp_step.batch(0)))
    assert dp_step.ledger.steps_done == 0


def test_a_step_number_that_is_not_the_ledgers_next_is_refused():
    """A repeated number would draw the same Poisson batch and the same noise again (finding
    7 of the privacy review): only the ledger's next step is taken."""
    ledger = PrivacyLedger.calibrate("rdp", 0.2, 3, 2.0, 1e-5, 0.3)
    model, dp_step = tiny_step(ledger)
    dp_step(0, micro_batches(model, dp_step.batch(0)))
    for repeated in (0, 2):
        with pytest.raises(DpvipInputError, match=f"step {repeated} is not the ledger's next step 1"):
            dp_step(repeated, micro_batches(model, dp_step.batch(repeated)))
    assert dp_step.ledger.steps_done == 1
    dp_step(1, micro_batches(model, dp_step.batch(1)))
    assert dp_step.ledger.steps_done == 2


def test_without_a_ledger_the_rate_and_steps_are_needed():
    with pytest.raises(DpvipInputError, match="sample rate and steps"):
        tiny_step(None)


def test_a_delta_of_at_least_one_over_n_is_refused_unless_allowed():
    ledger = PrivacyLedger("rdp", 0.2, 3.0, 0.3, 0.02, 10.0, 5)  # delta * n = 0.02 * 50 = 1
    with pytest.raises(
        DpvipInputError, match=r"delta 0.02 is at least 1/n .* n = 50 .*DPStep\(..., allow_large_delta=True\)"
    ):
        tiny_step(ledger)
    _, dp_step = tiny_step(ledger, allow_large_delta=True)
    record = dp_step.ledger.record()
    assert record["delta_n"] == pytest.approx(1.0) and record["delta_at_least_1_over_n"] is True


def test_the_ledger_records_the_randomness_and_delta_n(tmp_path):
    ledger = PrivacyLedger.calibrate("rdp", 0.2, 2, 2.0, 1e-5, 0.3)
    _, seeded = tiny_step(ledger)
    record = seeded.ledger.record()
    assert record["randomness"] == "seeded" and record["private"] is False and "NOT PRIVATE" in record["note"]
    assert record["examples"] == 50 and record["delta_n"] == pytest.approx(5e-4)
    assert record["delta_at_least_1_over_n"] is False
    layer = Tiny()
    clipper = ClippedGradientSum(layer, 0.3)
    secret = DPStep(clipper, torch.optim.SGD(clipper.params, lr=0.1), ledger, 50, RunRandomness.secret(tmp_path))
    record = secret.ledger.record()
    assert record["randomness"] == "secret" and record["private"] is True and "note" not in record
    # a seeded run's stored ledger does not continue as a secret one (nor the other way)
    with pytest.raises(DpvipInputError, match="randomness 'seeded'"):
        secret.ledger.resumed(seeded.ledger.record(), 0, "state.pt")


def test_the_ledger_names_the_private_data_and_the_run_and_an_older_state_resumes(tmp_path):
    # What lets a bundle compose every release on one dataset once (`report.privacy_totals`).
    ledger = PrivacyLedger.calibrate("rdp", 0.2, 4, 2.0, 1e-5, 0.3)
    randomness = RunRandomness.secret(tmp_path)
    _, dp_step = tiny_step(ledger, data="photo_crops")
    named = DPStep(dp_step.clipper, dp_step.optimizer, ledger, 50, randomness, data="photo_crops")
    record = named.ledger.record()
    assert record["data"] == "photo_crops" and record["run"] == randomness.identity()
    assert tiny_step(ledger)[1].ledger.record()["data"] is None
    # a state saved before the ledger named them (no data, no run) resumes, and keeps them
    older = {key: value for key, value in named.ledger.charge(1).record().items() if key not in ("data", "run")}
    named.load_state_dict({"privacy": older}, 1, "state.pt")
    assert named.ledger.steps_done == 1
    assert (named.ledger.data, named.ledger.run) == ("photo_crops", randomness.identity())


def test_the_noise_comes_from_the_runs_key(tmp_path):
    """Full batch (q = 1, so every run takes every example): two secret keys give two noise
    draws, one key the same draw; nothing of the config's seed enters."""
    ledger = PrivacyLedger("rdp", 1.0, 2.0, 0.3, 1e-5, 10.0, 1)

    def update(randomness: RunRandomness) -> torch.Tensor:
        layer = nn.Linear(20, 20)
        torch.nn.init.zeros_(layer.weight)
        dp_step = DPStep(
            ClippedGradientSum(layer, 0.3), torch.optim.SGD(layer.parameters(), lr=1.0), ledger, 50, randomness
        )
        dp_step(0, [zero_losses(layer, 50)])
        return layer.weight.detach().clone()

    first, second = RunRandomness.secret(tmp_path / "a"), RunRandomness.secret(tmp_path / "b")
    assert not torch.equal(update(first), update(second))
    assert torch.equal(update(first), update(RunRandomness.secret(tmp_path / "a")))


def test_a_run_resumed_from_its_state_dict_is_the_uninterrupted_run():
    """state_dict / load_state_dict carry the ledger and the optimizer (momentum here): 2
    steps, a checkpoint, a fresh DPStep resumed from it for the 3rd = 3 steps in one go."""
    ledger = PrivacyLedger.calibrate("rdp", 0.2, 3, 2.0, 1e-5, 0.3)
    torch.manual_seed(0)
    whole, whole_step = tiny_step(ledger)
    start = copy.deepcopy(whole.state_dict())
    for step in range(3):
        whole_step(step, micro_batches(whole, whole_step.batch(step)))
    torch.manual_seed(0)
    first, first_step = tiny_step(ledger)
    first.load_state_dict(start)
    for step in range(2):
        first_step(step, micro_batches(first, first_step.batch(step)))
    saved = copy.deepcopy({"model": first.state_dict(), **first_step.state_dict()})
    assert saved["privacy"]["steps_done"] == 2 and saved["optimizer"]["state"]  # momentum kept
    resumed, resumed_step = tiny_step(ledger)
    resumed.load_state_dict(saved["model"])
    resumed_step.load_state_dict(saved, 2, "state.pt")
    resumed_step(2, micro_batches(resumed, resumed_step.batch(2)))
    assert resumed_step.ledger.steps_done == 3
    for got, want in zip(resumed.parameters(), whole.parameters()):
        assert torch.equal(got, want)
    resumed_step.close()
    assert not any(layer._forward_hooks for layer in resumed.modules())


def test_a_state_without_a_ledger_or_of_another_mechanism_is_refused():
    ledger = PrivacyLedger.calibrate("rdp", 0.2, 3, 2.0, 1e-5, 0.3)
    _, dp_step = tiny_step(ledger)
    with pytest.raises(DpvipInputError, match="state.pt holds no privacy ledger"):
        dp_step.load_state_dict({"privacy": None}, 0, "state.pt")
    other = tiny_step(PrivacyLedger.calibrate("rdp", 0.2, 3, 4.0, 1e-5, 0.3))[1].state_dict()
    with pytest.raises(DpvipInputError, match="noise_multiplier"):
        dp_step.load_state_dict(other, 0, "state.pt")
    with pytest.raises(DpvipInputError, match="counts 0 steps, its state 1"):
        dp_step.load_state_dict(dp_step.state_dict(), 1, "state.pt")


def test_micro_batches_that_are_not_the_steps_poisson_batch_are_refused():
    """A user's own shuffled DataLoader gives batches the accounting never assumed: the
    step refuses them before the model changes (3 examples where step 0 drew about 10)."""
    ledger = PrivacyLedger.calibrate("rdp", 0.2, 2, 2.0, 1e-5, 0.3)
    model, dp_step = tiny_step(ledger)
    drawn = dp_step.batch(0)
    assert len(drawn) != 3
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(DpvipInputError, match=rf"hold 3 examples, .* holds {len(drawn)}: feed .*dp_step.batch\(step\)"):
        dp_step(0, micro_batches(model, list(range(3))))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert dp_step.ledger.steps_done == 1  # the step stays charged: its batch was drawn


def test_a_micro_batch_split_of_the_steps_batch_is_accepted():
    ledger = PrivacyLedger.calibrate("rdp", 0.2, 2, 2.0, 1e-5, 0.3)
    model, dp_step = tiny_step(ledger)
    report = dp_step(0, micro_batches(model, dp_step.batch(0), size=3))
    assert report.examples == len(dp_step.batch(0))
