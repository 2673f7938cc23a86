"""Multi-process DP fine-tuning: 2 gloo processes on CPU (torch.multiprocessing, a file://
rendezvous) each take their share of every Poisson batch (the 1,437 digits are 2 sampling
blocks, one a rank), their clipped sums meet before the noise is added once, and they split
the test set. Seeded randomness: they end with the weights of 1 process up to the order of
floating-point sums (max |difference| < 1e-6), the same ledger, batch sizes, clipped count
and accuracy. The same job through `dpvip evaluate run` (what torchrun starts) writes what
one process writes."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
import yaml

from dpvip.cli import evaluate as evaluate_cli
from dpvip.evaluate import dp_finetune as dp_module
from dpvip.evaluate.accuracy import classifier_accuracy
from dpvip.evaluate.datasets import digits
from dpvip.evaluate.dp_finetune import DPFinetuneSettings, train_dp_classifier
from dpvip.evaluate.jobs import run_evaluation
from dpvip.models import MAESettings
from dpvip.models.checkpoint import save_mae
from dpvip.models.mae import MaskedAutoencoder
from dpvip.plan.vip_evaluations import Evaluation
from dpvip.privacy.sampling import PoissonBatches
from dpvip.train.distributed import Distributed
from dpvip.train.resume import JobState

# slow: 2 fresh interpreters import torch and the library (32 s on 2 busy cores)
pytestmark = [pytest.mark.usefixtures("torch_one_thread"), pytest.mark.slow]

SETTINGS = DPFinetuneSettings(
    batch_size=64, noise_multiplier=1.0, steps=4, lr=1e-2, warmup_steps=1, micro_batch=16, randomness="seeded"
)
FEATURES = {"pooling": "mean", "last_blocks": 1, "final_norm": True}
SECTION = {
    "image_size": 8,
    "datasets": {"ImageNet-1K": {"source": "digits", "test_fraction": 0.2, "seed": 0}},
    "dp_finetune": {"dataset": "ImageNet-1K", "batch_size": 128, "noise_multiplier": 1.0, "steps": 3, "lr": 1e-2}
    | {"warmup_steps": 1, "clip_norm": 1.0, "micro_batch": 32, "randomness": "seeded", "features": FEATURES},
}
EVALUATION = Evaluation("dp_finetune", "vip_pico", "ImageNet-1K")


def pico() -> MaskedAutoencoder:
    torch.manual_seed(0)
    return MaskedAutoencoder(MAESettings("pico", image_size=8, patch_size=4))


def counting_micro_batches(shares: list[int]):
    """dp_finetune's micro-batches, counting this rank's examples of each step."""
    micro_batches = dp_module._micro_batches

    def counted(classifier, train, indices, micro_batch, device):
        shares.append(len(indices))
        return micro_batches(classifier, train, indices, micro_batch, device)

    return counted


def rank_main(rank: int, world: int, folder: Path, checkpoint: str) -> None:
    """One rank: the library's DP fine-tuning, then the `dpvip evaluate run` job."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{folder / 'rendezvous'}", rank=rank, world_size=world
    )
    dist = Distributed.from_environment()  # joins the group already made
    shares: list[int] = []
    dp_module._micro_batches = counting_micro_batches(shares)
    train, test = digits(8)
    job = JobState(folder / f"library-{rank}", dist=dist)
    classifier, record = train_dp_classifier(pico(), train, SETTINGS, job, progress=False)
    accuracy = classifier_accuracy(classifier, test, dist=dist)
    torch.save({"weights": classifier.state_dict(), "record": record, "accuracy": accuracy}, folder / f"rank{rank}.pt")
    torch.save(shares, folder / f"shares{rank}.pt")

    parser = argparse.ArgumentParser()
    evaluate_cli.add_commands(parser.add_subparsers())
    arguments = ["evaluate", "run", "--settings", str(folder / "settings.yaml"), "--out", str(folder / "two.json")]
    args = parser.parse_args([*arguments, "--checkpoint", checkpoint])
    assert args.handler(args) == 0  # closes the process group


def without(path: Path, *keys: str) -> dict:
    record = json.loads(path.read_text())
    return {key: value for key, value in record.items() if key not in keys}


def test_two_gloo_processes_match_one(tmp_path):
    checkpoint = tmp_path / "model.pt"
    save_mae(pico(), checkpoint, {})
    (tmp_path / "settings.yaml").write_text(yaml.safe_dump(evaluate_cli.evaluation_settings(EVALUATION, SECTION)))
    mp.spawn(rank_main, args=(2, tmp_path, str(checkpoint)), nprocs=2, join=True)

    train, test = digits(8)
    one, record = train_dp_classifier(pico(), train, SETTINGS, JobState(tmp_path / "one"), progress=False)
    two = torch.load(tmp_path / "rank0.pt", weights_only=True)
    rank1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    weights = one.state_dict()
    difference = max(float((two["weights"][key] - weights[key]).abs().max()) for key in weights)
    assert 0 < difference < 1e-6  # not zero: the ranks really summed apart
    assert all(torch.equal(two["weights"][key], rank1["weights"][key]) for key in weights)  # ranks agree exactly
    assert two["record"] == rank1["record"] == record  # ledger, batch sizes, clipped fraction
    assert record["privacy"]["steps_done"] == 4 and record["privacy"]["randomness"] == "seeded"
    assert two["accuracy"] == rank1["accuracy"] == classifier_accuracy(one, test)
    # each rank ran its share of every step: block 0 (examples 0-1023) on rank 0, block 1 on rank 1
    shares = [torch.load(tmp_path / f"shares{rank}.pt") for rank in (0, 1)]
    sampler = PoissonBatches(len(train), 64 / len(train), 4, dp_module.run_randomness(SETTINGS, train, None))
    sizes = [len(sampler.indices(step)) for step in range(4)]
    assert [a + b for a, b in zip(*shares)] == sizes and min(shares[0]) > 0 and min(shares[1]) > 0

    # the job through the command, 2 processes against 1
    run_evaluation(EVALUATION, SECTION, str(checkpoint), tmp_path / "one.json")
    assert without(tmp_path / "two.json", "seconds", "world_size") == without(
        tmp_path / "one.json", "seconds", "world_size"
    )
    assert json.loads((tmp_path / "two.json").read_text())["world_size"] == 2
