"""DP fine-tuning (ViP A.5): the ledger spends what the accountant says for a given sigma,
batches are Poisson, a private run still learns, and bad settings are refused by name. Its
step against a naive per-example reference: tests/privacy/test_step.py."""

import math
from dataclasses import replace

import pytest

from dpvip.per_example import PER_EXAMPLE, read_correctness
import torch

from dpvip.errors import DpvipInputError
from dpvip.evaluate.datasets import digits
from dpvip.evaluate.dp_finetune import DPFinetuneSettings, dp_finetune, run_randomness, warmup_then_constant
from dpvip.evaluate.features import FeatureChoice
from dpvip.models import MAESettings
from dpvip.models.mae import MaskedAutoencoder
from dpvip.privacy import accounting
from dpvip.privacy.sampling import PoissonBatches

pytestmark = pytest.mark.usefixtures("torch_one_thread")

SMALL = DPFinetuneSettings(batch_size=60, noise_multiplier=1.0, steps=40, lr=1e-2, warmup_steps=5, micro_batch=32)


def pico(image_size: int = 8) -> MaskedAutoencoder:
    torch.manual_seed(0)
    return MaskedAutoencoder(MAESettings("pico", image_size=image_size, patch_size=4))


@pytest.fixture(scope="module")
def digits8():
    return digits(8)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("dp-finetune") / "work"


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """The module's key store, its keys kept after their runs (a test reads the run's batches)."""
    return tmp_path_factory.mktemp("keys")


@pytest.fixture(scope="module")
def small_run(digits8, work, keys):
    """40 steps on 300 training digits at q = 0.2 (threads set here: module scope)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train, test = digits8
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("DPVIP_KEY_DIR", str(keys))
            patch.setenv("DPVIP_KEEP_KEYS", "true")
            return dp_finetune(pico(), train.subset(range(300)), test.subset(range(60)), SMALL, work, progress=False)
    finally:
        torch.set_num_threads(threads)


def test_the_ledger_spends_what_the_accountant_says(small_run):
    q, delta = 60 / 300, 1 / (2 * 300)
    expected = accounting.epsilon([accounting.Mechanism(q, 1.0, 40)], delta, "rdp").epsilon
    privacy = small_run["privacy"]
    assert privacy["epsilon_spent"] == pytest.approx(expected, rel=1e-12)
    assert privacy["steps_done"] == privacy["planned_steps"] == 40
    assert (privacy["accountant"], privacy["sample_rate"], privacy["noise_multiplier"]) == ("rdp", q, 1.0)
    assert (privacy["delta"], privacy["clip_norm"], privacy["examples"]) == (delta, SMALL.clip_norm, 300)
    assert small_run["settings"]["noise_multiplier"] == 1.0
    correct = small_run["top1_percent"] * 60 / 100  # top-1 over the 60 test digits: a whole count
    assert correct == pytest.approx(round(correct)) and 0 <= round(correct) <= 60, small_run["top1_percent"]


def test_batches_are_the_projects_poisson_batches(small_run, work, keys, digits8, monkeypatch):
    monkeypatch.setenv("DPVIP_KEY_DIR", str(keys))
    sampler = PoissonBatches(300, 0.2, 40, run_randomness(SMALL, digits8[0].subset(range(300)), work))  # the run's key
    sizes = torch.tensor([len(sampler.indices(step)) for step in range(40)], dtype=torch.float64)
    realised = small_run["batch_sizes"]
    assert realised["mean"] == pytest.approx(float(sizes.mean())) and (realised["min"], realised["max"]) == (
        sizes.min(),
        sizes.max(),
    )
    binomial_std = math.sqrt(300 * 0.2 * 0.8)
    assert abs(realised["mean"] - 60) < 4 * binomial_std / math.sqrt(40)
    assert 0.5 * binomial_std < realised["std"] < 1.5 * binomial_std
    assert realised["expected"] == 60


def test_warm_up_then_constant_lr():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    scheduler = warmup_then_constant(optimizer, 4)
    lrs = []
    for _ in range(7):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs == pytest.approx([0.125, 0.25, 0.375, 0.5, 0.5, 0.5, 0.5])


def test_private_fine_tuning_learns_digits(digits8, tmp_path):
    train, test = digits8
    settings = DPFinetuneSettings(batch_size=256, noise_multiplier=1.0, steps=30, lr=1e-2, warmup_steps=5)
    result = dp_finetune(pico(), train, test, settings, tmp_path, progress=False)
    assert result["top1_percent"] > 40  # chance is 10%
    bits, test_set = read_correctness(result[PER_EXAMPLE])  # each test example's, for paired comparisons
    assert 100 * bits.mean() == pytest.approx(result["top1_percent"]) and test_set.startswith(f"{test.name}:")
    assert result["privacy"]["epsilon_spent"] < 10


def test_a_secret_run_needs_its_work_folder(digits8):
    train, test = digits8
    with pytest.raises(DpvipInputError, match="needs a private work folder"):
        dp_finetune(pico(), train.subset(range(100)), test.subset(range(10)), SMALL, progress=False)


@pytest.mark.parametrize(
    "change, field",
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 10_000}, "batch_size"),
        ({"steps": 0}, "steps"),
        ({"micro_batch": 0}, "micro_batch"),
        ({"warmup_steps": -1}, "warmup_steps"),
        ({"noise_multiplier": 0.0}, "noise_multiplier"),
        ({"lr": 0.0}, "lr"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"clip_norm": 0.0}, "clip_norm"),
        ({"delta": 1.5}, "delta"),
        ({"accountant": "moments"}, "accountant"),
        ({"features": FeatureChoice(pooling="max")}, "pooling"),
        ({"features": FeatureChoice(last_blocks=2)}, "last_blocks"),
        ({"randomness": "public"}, "randomness"),
    ],
)
def test_bad_settings_are_refused_by_name(change, field, digits8):
    train, test = digits8
    with pytest.raises(DpvipInputError, match=field):
        dp_finetune(pico(), train.subset(range(100)), test.subset(range(10)), replace(SMALL, **change), progress=False)


def test_the_noise_stream_follows_the_training_data_not_only_its_size(digits8):
    """Two training sets of the same size and settings under one seed (or one key) draw
    different batches: the stream is keyed by the data's digest (a mutation that dropped it,
    `"data": ""`, passed every other test)."""
    first, second = digits8[0].subset(range(300)), digits8[0].subset(range(300, 600))
    assert len(first) == len(second) and first.digest() != second.digest()
    seeded = replace(SMALL, randomness="seeded")
    a, b = (run_randomness(seeded, data, None) for data in (first, second))
    assert a.identity() != b.identity()
    assert run_randomness(seeded, first, None).identity() == a.identity()  # the same data: the same stream
    draws = [PoissonBatches(300, 0.2, 1, randomness).indices(0).tolist() for randomness in (a, b)]
    assert draws[0] != draws[1]
