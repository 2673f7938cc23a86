"""Parts of the GPU check (tests/gpu/paper_steps.py) about the DP step's speed and its clip
bound, kept apart from the job steps:

- `bench_shapes`: `dpvip bench dp-step` at ViP-Base 224 px in bf16 and fp32, batch 512 in
  micro-batches of 256 and batch 256 in micro-batches of 128 (nonprivate, ours, opacus
  ghost clipping), then the `paper` preset (batch 2,048 in micro-batches of 256, bf16); with
  `before` (a copy of an earlier src/), ours of that source and of this one at bf16 512 /
  256 in three alternating pairs of processes (`before_after`).
- `job_ratios`: for each DP job type's network at paper shape, one DP step (`DPStep`, as the
  jobs take it) against the non-private step of the same batch: the time ratio the compute
  budget uses (`dpvip.budget.DP_STEP_TIME_RATIOS`) and the peak memory the paper config's
  micro-batches are chosen from.
- `bound`: the clip bound on the device (cancelling tokens under bf16 autocast: each share at
  most C) and its cost on ViP-Base's MAE gradients (computed norm over the bound).
- `operations`: `dpvip bench dp-ops` on the device at bf16 and fp32, 512 / 256, beside the
  CUDA path as a CPU counts it (`--gpu-path`): the host's operations a step, and whether the
  CPU's count of the CUDA path is the device's.
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

REPO = Path(__file__).resolve().parents[2]
BENCH_SHAPES = [  # (precision, batch, micro-batch)
    ("bf16", 512, 256),
    ("bf16", 256, 128),
    ("fp32", 512, 256),
    ("fp32", 256, 128),
]


def run_bench(arguments: list[str], source: Path | None = None) -> dict:
    # an earlier source goes first on the path, before this checkout's (and the wheels')
    environment = os.environ | (
        {"PYTHONPATH": os.pathsep.join([str(source.resolve()), os.environ.get("PYTHONPATH", "")])} if source else {}
    )
    done = subprocess.run(
        [sys.executable, "-m", "dpvip.cli", "bench", "dp-step", *arguments, "--json"],
        capture_output=True, text=True, cwd=REPO, env=environment, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"dpvip bench dp-step {' '.join(arguments)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def _summary(record: dict) -> dict:
    keep = ("seconds_per_step", "images_per_second", "time_ratio", "peak_mb", "memory_ratio")
    return {name: {key: row.get(key) for key in keep} for name, row in record["methods"].items()} | {
        "cross_check": record["cross_check"],
        "noise_seconds": record["noise"].get("seconds"),
        "norms_seconds": record.get("norms", {}).get("seconds"),  # absent from code before 2026-11-29
    }


def bench_shapes(
    out: Path, device: str, tiny: bool, before: Path | None, shapes: list | None = None, methods: list | None = None
) -> dict:
    """`shapes`: (precision, batch, micro-batch) to run (default BENCH_SHAPES); `methods`
    beside nonprivate (default ours and opacus_ghost)."""
    model = ["--model", "micro", "--image-size", "32", "--patch-size", "4"] if tiny else ["--preset", "vip-base"]
    shapes = [("bf16", 16, 8), ("fp32", 16, 8)] if tiny else shapes or BENCH_SHAPES
    methods = ["--methods", "nonprivate", *(methods or ["ours", "opacus_ghost"])]
    records, full = {}, {}
    for precision, batch, micro in shapes:
        shape = [*model, "--batch", str(batch), "--micro-batch", str(micro), "--precision", precision]
        record = run_bench([*shape, "--device", device, "--rounds", "3", *methods])
        full[f"{precision} {batch}/{micro}"] = record
        records[f"{precision} {batch}/{micro}"] = _summary(record)
        print(f"bench {precision} {batch}/{micro}: {json.dumps(records[f'{precision} {batch}/{micro}'])}", flush=True)
    paper = (
        [*model, "--batch", "32", "--micro-batch", "16", "--precision", "bf16", "--device", device]
        if tiny
        else ["--preset", "paper"]
    )
    record = run_bench([*paper, "--rounds", "2", *methods])
    full["paper"] = record
    records["paper"] = _summary(record)
    if before is not None:
        records["before/after"] = before_after(model, shapes[0], device, before, full)
    (out / "bench.json").write_text(json.dumps(full))  # one file: a GPU run brings back few
    return records


def before_after(model: list, shape: tuple, device: str, before: Path, full: dict, pairs: int = 3) -> dict:
    """Ours of `before` (an earlier src/) and of this checkout at `shape`, each against the
    non-private step of its own process, in `pairs` alternating pairs of processes: on an
    H200 a host-bound bf16 step's ratio moved 1.45-1.72x between processes of the same code,
    so one pair cannot tell a change from that spread."""
    precision, batch, micro = shape
    arguments = [*model, "--batch", str(batch), "--micro-batch", str(micro), "--precision", precision]
    arguments += ["--device", device, "--rounds", "5", "--methods", "nonprivate", "ours"]
    ratios: dict = {"before": [], "after": []}
    for k in range(pairs):
        for label, source in (("before", before), ("after", None)):
            record = run_bench(arguments, source)
            full[f"{label} {precision} {batch}/{micro} #{k + 1}"] = record
            ratios[label].append(record["methods"]["ours"]["time_ratio"])
    summary = {label: {"ratios": values, "median": statistics.median(values)} for label, values in ratios.items()}
    print(f"before/after {precision} {batch}/{micro}: {json.dumps(summary)}", flush=True)
    return summary


# --- one DP step of each job type's network against its non-private step --------------------
def _timed(device: str, run, rounds: int) -> tuple[float, float | None]:
    """(median seconds, peak MiB) of `run()` after one warm-up."""
    run()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    seconds = []
    for _ in range(rounds):
        began = time.perf_counter()
        run()
        if device == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - began)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None
    return statistics.median(seconds), peak


def step_against_nonprivate(model: nn.Module, chunks: list, losses, views: int, device: str, rounds: int) -> dict:
    """`chunks`: a batch's micro-batches (tuples of inputs); `losses(model, *chunk)`: per-row
    losses. The non-private step sums them (over K views, their mean) and backpropagates; the
    DP step is `DPStep` with a fixed sigma at sample rate 1, both under bf16 autocast, AdamW."""
    from dpvip.privacy.clipping import ClippedGradientSum
    from dpvip.privacy.ledger import PrivacyLedger
    from dpvip.privacy.randomness import RunRandomness
    from dpvip.privacy.step import DPStep

    autocast = lambda: torch.autocast(device, dtype=torch.bfloat16)  # noqa: E731
    examples = sum(len(chunk[0]) for chunk in chunks) // views
    plain, private = copy.deepcopy(model), copy.deepcopy(model)
    plain_optimizer = torch.optim.AdamW([p for p in plain.parameters() if p.requires_grad], lr=1e-4)

    def plain_step():
        plain_optimizer.zero_grad(set_to_none=True)
        for chunk in chunks:
            with autocast():
                loss = losses(plain, *chunk).sum() / views
            loss.backward()
        plain_optimizer.step()

    clipper = ClippedGradientSum(private, 0.1, views=views)
    optimizer = torch.optim.AdamW(clipper.params, lr=1e-4)
    ledger = PrivacyLedger("rdp", 1.0, 0.5, 0.1, 0.0, float("inf"), 2**62)
    dp_step = DPStep(clipper, optimizer, ledger, examples, RunRandomness.seeded(0), autocast=autocast)
    steps = iter(range(10**6))
    dp = lambda: dp_step(next(steps), [lambda c=c: losses(private, *c) for c in chunks])  # noqa: E731
    # Each timed with the other's model and optimizer resident: the peaks overstate a job's by
    # one model copy (ViP-Base: 0.4 GB in float32) and its AdamW state (0.8 GB).
    plain_seconds, plain_peak = _timed(device, plain_step, rounds)
    dp_seconds, dp_peak = _timed(device, dp, rounds)
    dp_step.close()
    return {
        "examples": examples,
        "micro_batches": len(chunks),
        "nonprivate_seconds": plain_seconds,
        "dp_seconds": dp_seconds,
        "time_ratio": dp_seconds / plain_seconds,
        "nonprivate_peak_mib": plain_peak,
        "dp_peak_mib": dp_peak,
    }


def job_ratios(device: str, tiny: bool) -> dict:
    """DP-MAE (ViP-Base, 224 px), DP fine-tuning (ViP-Base classifier, 1,000 classes, 224 px),
    DP-RandP Phases II/III (WRN-16-4, 32 px, 16 views) and a DP linear head on features
    (Mehta et al.'s heads, DP-RandP's private probe), each at a paper step's micro-batch."""
    from dpvip.evaluate.features import FeatureChoice
    from dpvip.evaluate.finetune import Classifier
    from dpvip.models import MAESettings
    from dpvip.models.mae import MaskedAutoencoder
    from dpvip.models.wrn import WideResNet
    from dpvip.randp.augmult import augmult_views

    torch.manual_seed(0)
    size, image, patch = ("micro", 32, 4) if tiny else ("base", 224, 16)
    count = 2
    # tiny: one timed step after the warm-up; on CPU the ghost norms run in Triton's
    # interpreter (the path under test, not a speed), 10-25 s a step for the WRN
    rounds, head_rounds = (1, 1) if tiny else (3, 5)
    results = {}
    with torch.device(device):
        mae = MaskedAutoencoder(MAESettings(size, image_size=image, patch_size=patch))
    mae_loss = lambda m, x, n: m(x, n).loss  # noqa: E731
    # for each job type, the largest size within 70% of an 80 GB card sets config/paper.yaml's
    # micro-batch (DP-MAE bf16 peaks: 14.2 GiB at 256, 24.7 at 512 on an H200; about 46 at 1,024)
    for micro in (4,) if tiny else (256, 512, 1024):
        chunks = [(torch.rand(micro, 3, image, image, device=device), mae.mask_noise(micro).to(device))] * 2
        results[f"dp_mae {micro}"] = step_against_nonprivate(mae, chunks, mae_loss, 1, device, rounds)
    classes = 10 if tiny else 1000
    with torch.device(device):
        classifier = Classifier(copy.deepcopy(mae), classes, FeatureChoice(pooling="mean"))
    cross_entropy = lambda m, x, y: F.cross_entropy(m(x), y, reduction="none")  # noqa: E731
    for micro in (4,) if tiny else (128, 256, 512):
        images = torch.rand(micro, 3, image, image, device=device)
        labelled = [(images, torch.randint(0, classes, (micro,), device=device))] * 2
        results[f"dp_finetune {micro}"] = step_against_nonprivate(
            classifier, labelled, cross_entropy, 1, device, rounds
        )
    del mae, classifier
    views, micro_wrn = (2, 4) if tiny else (16, 256)
    with torch.device(device):
        wrn = WideResNet("wrn16_4", 10)
    crops = []
    for k in range(count):
        images = torch.rand(micro_wrn, 3, 32, 32, device=device)
        crops.append((augmult_views(images, list(range(k * micro_wrn, (k + 1) * micro_wrn)), views, 4),
                      torch.randint(0, 10, (micro_wrn,), device=device).repeat_interleave(views)))  # fmt: skip
    results["dprandp_private"] = step_against_nonprivate(wrn, crops, cross_entropy, views, device, rounds)
    width, rows = (64, 32) if tiny else (2048, 65536)
    with torch.device(device):
        head = nn.Linear(width, 1000)
    features = [(torch.randn(rows, width, device=device), torch.randint(0, 1000, (rows,), device=device))]
    results["linear_head"] = step_against_nonprivate(head, features, cross_entropy, 1, device, head_rounds)
    return results


# --- the clip bound on the device ------------------------------------------------------------
def bound(device: str, tiny: bool) -> dict:
    """Each share at most C on cancelling tokens (test_rounding's inputs, on the device under
    bf16 autocast), and N / bound on an MAE's gradients: what the bound costs."""
    sys.path.insert(0, str(REPO / "tests/privacy"))
    from test_rounding import GHOST_SHAPES, cancelling_example

    from dpvip.models import MAESettings
    from dpvip.models.mae import MaskedAutoencoder
    from dpvip.privacy import clipping, layer_rules
    from dpvip.privacy.clipping import ClippedGradientSum

    shares = []
    # tiny (CPU, the fused kernel interpreted): without the 512-token shape (40 s of the check's 53)
    for tokens, fan_in, fan_out in GHOST_SHAPES[:2] if tiny else GHOST_SHAPES:
        for scale in (1.0, 2.0**13, 2.0**-13):
            a, g = (t.to(device) for t in cancelling_example(tokens, scale, fan_in, fan_out))
            layer = nn.Linear(fan_in, fan_out, bias=False, device=device)
            summer = ClippedGradientSum(layer, 1e-3 * scale)
            with torch.autocast(device, dtype=torch.bfloat16):
                summer.add(lambda: (layer(a).float() * g).sum((1, 2)))
            summer.close()
            shares.append(float(summer.sums[0].double().norm()) / (1e-3 * scale))
    seen = {}
    original = clipping.bounded_clip_factors

    def spy(total, errors, roundings, clip_norm):
        seen["ratio"] = total.sqrt() / ((total + errors).sqrt() + roundings.sqrt())
        return original(total, errors, roundings, clip_norm)

    size, image, patch, batch = ("micro", 32, 4, 8) if tiny else ("base", 224, 16, 64)
    with torch.device(device):
        mae = MaskedAutoencoder(MAESettings(size, image_size=image, patch_size=patch))
    images = torch.rand(batch, 3, image, image, device=device)
    clipping.bounded_clip_factors = spy
    try:
        summer = ClippedGradientSum(mae, 1e-3)
        with torch.autocast(device, dtype=torch.bfloat16):
            summer.add(lambda: mae(images, mae.mask_noise(batch).to(device)).loss)
        summer.close()
    finally:
        clipping.bounded_clip_factors = original
    ratio = seen["ratio"]
    return {
        **fused_ghost_check(device, tiny),
        "sixteen_bit_products_to_float32": clipping.sixteen_bit_products_to_float32(torch.device(device)),
        "adds_sixteen_bit_products_in_place": layer_rules.adds_sixteen_bit_products_in_place(torch.device(device)),
        "cancelling_max_share_over_c": max(shares),
        "cancelling_cases": len(shares),
        "mae_norm_over_bound_min": float(ratio.min()),
        "mae_norm_over_bound_mean": float(ratio.mean()),
    }


def fused_ghost_check(device: str, tiny: bool) -> dict:
    """The fused ghost norm as the clipper runs it on the device (tuned on first use of each
    shape), against float64 on test_rounding's cancelling and random tokens at ViP's layer
    shapes: the worst |N^2 - ||W||^2| / (e S^2) and exact S / enlarged S (both at most 1)."""
    from test_rounding import GHOST_SHAPES, cancelling_example, fused_ghost_errors, random_example

    from dpvip.privacy.fused_ghost import fused_ghost_runs_on

    if not fused_ghost_runs_on(device):
        return {"fused_ghost": "does not run here"}
    worst = []
    shapes = [(8, 16, 16)] if tiny else GHOST_SHAPES + [(196, 512, 2048), (48, 768, 3072)]  # tokens: whole groups of 4
    for tokens, fan_in, fan_out in shapes:
        for a, g in [cancelling_example(tokens, s, fan_in, fan_out) for s in (1.0, 2.0**13, 2.0**-13)] + [
            random_example(tokens, 0, fan_in, fan_out)
        ]:
            worst.append(fused_ghost_errors(a.bfloat16().to(device), g.bfloat16().to(device)))
    return {
        "fused_error_over_bound_max": max(row[0] for row in worst),
        "fused_exact_s_over_enlarged_max": max(row[1] for row in worst),
    }


def noise_kernel(device: str, tiny: bool) -> dict:
    """The fused kernel on the device against its numpy reference (the first 2^20 values), and
    its time for ViP-Base's 99M coordinates (median of 5 after a warm-up)."""
    import hashlib

    import numpy as np

    from dpvip.privacy.cuda_noise import keyed_normal_add_, philox_reference

    a, b = hashlib.sha256(b"a").digest()[:16], hashlib.sha256(b"b").digest()[:16]
    count = 2**12 if tiny else 2**20
    values = keyed_normal_add_(torch.zeros(count, device=device), 1.0, a, b).cpu().numpy()
    difference = float(np.abs(values - philox_reference(count, 1.0, a, b)).max())
    flat = torch.zeros(2**12 if tiny else 99_000_000, device=device)
    seconds = []
    for k in range(6):
        if device == "cuda":
            torch.cuda.synchronize()
        began = time.perf_counter()
        keyed_normal_add_(flat, 1.0, a, b)
        if device == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - began)
    return {
        "max_difference_from_reference": difference,
        "coordinates": flat.numel(),
        "seconds": statistics.median(seconds[1:]),
    }


# --- the host's operations a step -------------------------------------------------------------
def operations(device: str, tiny: bool) -> dict:
    """Operations a step (`dpvip.bench.operations`), ours and the non-private step, on the
    device (ViP-Base 224 px, 512 / 256) and as this machine's CPU counts the CUDA path (the
    same model at 4 / 2: the count does not depend on the batch)."""
    from dpvip.bench.methods import BenchSetup
    from dpvip.bench.operations import count_operations

    model = {"model": "micro"} if tiny else {"model": "base", "image_size": 224, "patch_size": 16}
    report = {}
    for precision in ("bf16",) if tiny else ("bf16", "fp32"):
        runs = {"device": BenchSetup(**model, batch=4 if tiny else 512, micro_batch=2 if tiny else 256, device=device,
                                     precision=precision),
                "cpu_counting_cuda_path": BenchSetup(**model, batch=4, micro_batch=2, precision=precision)}  # fmt: skip
        for label, setup in runs.items():
            result = count_operations(setup, ["ours"], gpu_path=True)
            report[f"{precision} {label}"] = {
                "nonprivate": result.total("nonprivate"),
                "ours": result.total("ours"),
                "ratio": result.ratio("ours"),
                "added": result.added("ours"),
            }
    return report
