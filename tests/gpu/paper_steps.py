"""The GPU check, run by hand where a GPU is lent (no test collects it on CPU machines; its
tiny form runs in tests/gpu/test_paper_steps.py): the DP step's speed and clip bound
(`dp_speed`: the bench at ViP-Base shape in bf16 and fp32 and the `paper` preset, each DP
job type's step against its non-private step, the fused noise kernel, the clip bound on the
device, the host's operations a step on the device and as a CPU counts them), then one or
two real steps of each paper GPU job type that only a GPU runs at paper shape, through the
same code paths the workflow's jobs take:

- DP-MAE (ViP) at MAE base, 224 px, micro-batches of 32, an expected batch of one GPU's
  share (the paper: 98,304 over 48 GPUs = 2,048), on LAION-format shards of the stand-in;
- DP fine-tuning (Table 5's recipe: sigma 5.6, AdamW) of that ViP-Base on an ImageFolder of
  generated crops, at an expected batch `--finetune-batch` in micro-batches of 64;
- COCO ViTDet-B at 1024 px (the torchvision backend) on the generated stand-in, one GPU's
  share of a paper step: 8 images in passes of 1.

    PYTHONPATH=src python tests/gpu/paper_steps.py --out OUT [--device cuda] [--tiny] [--parts ...]
        [--before OLD_SRC]   # ours of an earlier src/ beside the bench, for a before/after

Writes OUT/paper_steps.json (seconds, peak GPU memory, the results), OUT/bench.json and
OUT/profile.txt, and prints a summary. `--tiny` runs micro shapes on CPU in about 100 s (the
test; the ghost norms in Triton's interpreter).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
import yaml

from dpvip.plan.vip_evaluations import Evaluation

sys.path.insert(0, str(Path(__file__).parent))
import dp_speed  # noqa: E402  (tests/gpu/dp_speed.py, beside this script)

REPO = Path(__file__).resolve().parents[2]


def dpvip(*arguments: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "dpvip.cli", *arguments], capture_output=True, text=True, cwd=REPO, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"dpvip {' '.join(arguments)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def timed(device: str, part):
    """(seconds, peak GPU MiB or None, value) of `part()`."""
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    began = time.perf_counter()
    value = part()
    if device == "cuda":
        torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None
    return round(time.perf_counter() - began, 2), peak, value


def _write_image(job: tuple[Path, int]) -> None:
    import numpy as np  # not torch: a forked worker must not touch torch's thread pool
    from PIL import Image

    path, seed = job
    pixels = np.random.default_rng(seed).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    Image.fromarray(pixels).resize((256, 256), Image.BILINEAR).save(path, quality=90)


def image_folder(root: Path, per_class: int) -> None:
    """Two classes of smooth random images at 256 px: a step's cost, not its accuracy."""
    jobs = []
    for split, count in (("train", per_class), ("test", 4)):
        for label in ("a", "b"):
            folder = root / split / label
            folder.mkdir(parents=True, exist_ok=True)
            jobs += [(folder / f"{k}.jpg", len(jobs) + k) for k in range(count)]
    with ProcessPoolExecutor(8, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_write_image, jobs, chunksize=64))


def dp_mae(work: Path, device: str, tiny: bool) -> tuple[dict, Path]:
    from dpvip.plan.dp_pretrain import DPPretrainSettings
    from dpvip.train.dp_mae import dp_train_mae

    images, batch, size = (256, 16, "micro") if tiny else (8192, 2048, "base")
    dpvip("data", "natural", "--images", str(images), "--resolution", "256", "--shard-size", "512",
          "--out", str(work / "laion"), "--no-checksums")  # fmt: skip
    paper = yaml.safe_load((REPO / "config/paper.yaml").read_text())["dp_pretrain"]["settings"]
    values = paper | {"steps": 2, "batch_size": batch, "warmup_steps": 1, "log_every": 1, "checkpoint_every": 100}
    if tiny:
        values |= {"image_size": 32, "patch_size": 4, "micro_batch": 8, "workers": 0}
    settings = DPPretrainSettings.from_config(values, size)
    run = work / "dp_mae"
    seconds, peak, record = timed(device, lambda: dp_train_mae(settings, str(work / "laion/index.json"), str(run)))
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return {
        "model": size,
        "examples": images,
        "expected_batch": batch,
        "micro_batch": settings.micro_batch,
        "seconds_two_steps": seconds,
        "peak_gpu_mib": peak,
        "steps": steps,
        "epsilon_spent": record["privacy"]["epsilon_spent"],
    }, run / "model.pt"


def evaluation(work: Path, device: str, job, section: dict, checkpoint: Path, standin: Path | None) -> dict:
    from dpvip.evaluate.jobs import run_evaluation

    task = job.task
    out = work / f"{task}.json"
    folder = str(standin) if standin else None
    seconds, peak, record = timed(device, lambda: run_evaluation(job, section, str(checkpoint), out, folder))
    return {"seconds": seconds, "peak_gpu_mib": peak, "result": record}


def paper_evaluate() -> dict:
    """The paper config's `evaluate` section, layered over the defaults as the workflow does."""
    from dpvip.config import layered_config, read_config_file

    return layered_config(read_config_file(REPO / "config/paper.yaml"))["evaluate"]


def task_settings(config: dict, task: str) -> dict:
    """A task's settings as its job reads them (`EvaluationPlan.job_section`: without `backbones`)."""
    return {key: value for key, value in config[task].items() if key != "backbones"}


def dp_finetune(work: Path, device: str, tiny: bool, batch: int, checkpoint: Path) -> dict:
    per_class = 16 if tiny else batch
    image_folder(work / "folder", per_class)
    config = paper_evaluate()
    finetune = task_settings(config, "dp_finetune") | {
        "batch_size": 8 if tiny else batch,
        "steps": 2,
        "warmup_steps": 1,
        "processes": 1,
        "delta": None,
        "randomness": "secret",
        "allow_large_delta": False,
    }
    folder = {"source": "image_folder", "train": str(work / "folder/train"), "test": str(work / "folder/test")}
    section = {
        "image_size": 32 if tiny else 224,
        "datasets": {"ImageNet-1K": folder},
        "dp_finetune": finetune | ({"micro_batch": 8} if tiny else {}),
    }
    return evaluation(work, device, Evaluation("dp_finetune", "vip_base", "ImageNet-1K"), section, checkpoint, None)


def coco(work: Path, device: str, tiny: bool, checkpoint: Path) -> dict:
    from dpvip.evaluate.coco_standin import CocoStandIn, write_split

    size, images = (64, 2) if tiny else (1024, 8)
    config = paper_evaluate()
    shapes = config["shapes"] | {"train_images": images, "val_images": 2}
    standin = work / "coco_standin"
    for split, count in (("train", images), ("val", 2)):
        spec = CocoStandIn(images=count, image_size=size, max_objects=shapes["max_objects"], seed=shapes["seed"])
        write_split(spec, split, standin)
    settings = task_settings(config, "coco") | {
        "source": "standin",
        "image_size": size,
        "iterations": 2,
        "batch_size": images,
        "micro_batch": 1,
        "warmup_iterations": 1,
        "processes": 1,
    }
    section = {"image_size": 224, "datasets": {}, "coco": settings, "shapes": shapes}
    return evaluation(work, device, Evaluation("coco", "vip_base"), section, checkpoint, standin)


def ade20k(work: Path, device: str, tiny: bool, checkpoint: Path) -> dict:
    """UPerNet on ViP-Base at 512 px: one GPU's share of a paper step (16 over 8 GPUs)."""
    config = paper_evaluate()
    settings = task_settings(config, "ade20k") | {
        "source": "standin",
        "image_size": 64 if tiny else 512,
        "epochs": 1,
        "batch_size": 2,
        "micro_batch": 2,
        "warmup_epochs": 0,
        "processes": 1,
    }
    shapes = config["shapes"] | {"train_images": 4, "val_images": 2}
    section = {"image_size": 224, "datasets": {}, "ade20k": settings, "shapes": shapes}
    return evaluation(work, device, Evaluation("ade20k", "vip_base"), section, checkpoint, None)


def profile(out: Path, device: str, tiny: bool) -> dict:
    """Where the DP step's time goes beside the non-private one's: torch.profiler over 3 steps
    each (after 2 warm-ups) of the bench's methods; the top operators by device time, kernel
    launches per step, and the step's host time (Python and dispatch) against its device time."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from dpvip.bench import BenchSetup, make_methods

    shape = {"batch": 8} if tiny else {"model": "base", "image_size": 224, "patch_size": 16, "batch": 512}
    setup = BenchSetup(**shape, micro_batch=None if tiny else 256, device=device, precision="bf16")
    methods, images, noise = make_methods(["nonprivate", "ours"], setup)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    summary = {}
    for name, method in methods.items():
        for _ in range(2):
            method.step(images, noise)
        with torch_profile(activities=activities) as prof:
            for _ in range(3):
                method.step(images, noise)
            if device == "cuda":
                torch.cuda.synchronize()
        events = prof.key_averages()
        sort = "self_cuda_time_total" if device == "cuda" else "self_cpu_time_total"
        table = events.table(sort_by=sort, row_limit=25)
        with open(out / "profile.txt", "a") as written:
            written.write(f"== {name}\n{table}\n")
        device_us = sum(getattr(e, "self_device_time_total", 0) for e in events) / 3
        summary[name] = {
            "host_ms_per_step": sum(e.self_cpu_time_total for e in events) / 3 / 1000,
            "device_ms_per_step": device_us / 1000,
            "kernels_per_step": sum(e.count for e in events if e.device_type.name == "CUDA") / 3,
            "top": table.splitlines()[:14],
        }
    return summary


def noise(device: str, tiny: bool) -> dict:
    """The device's noise path (on CUDA: the fused kernel of two keyed Philox generators XORed,
    then Box-Muller; on CPU: keyed mt19937): N(0, 1) by its moments and a Kolmogorov-Smirnov test, the same stream
    twice gives the same draws, another step other draws; and its time per coordinate."""
    from scipy import stats

    from dpvip.privacy.noise import gaussian_noise, noise_stream
    from dpvip.privacy.randomness import RunRandomness

    count = 2**16 if tiny else 2**24
    randomness = RunRandomness.fresh()
    draw = lambda step: gaussian_noise((count,), 1.0, noise_stream(randomness, step, torch.device(device)))  # noqa: E731
    seconds, _, values = timed(device, lambda: draw(0))
    again, other = draw(0), draw(1)
    sample = values[: 2**20].double().cpu().numpy()
    return {
        "coordinates": count,
        "seconds": seconds,
        "mean": float(values.double().mean()),
        "std": float(values.double().std()),
        "kurtosis": float(stats.kurtosis(sample, fisher=False)),
        "ks_pvalue": float(stats.kstest(sample, "norm").pvalue),
        "same_stream_same_draws": bool(torch.equal(values, again)),
        "other_step_equal_fraction": float((values == other).double().mean()),
        "device": str(values.device),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", help="where the data and runs go (default: OUT/work)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--tiny", action="store_true", help="micro shapes, for a CPU test")
    parser.add_argument("--finetune-batch", type=int, default=4096, help="DP fine-tuning's expected batch")
    parser.add_argument("--before", type=Path, help="an earlier src/ whose ours the bench times beside")
    parser.add_argument("--bench-shapes", nargs="+", help="precision:batch:micro-batch (default: all four)")
    parser.add_argument("--bench-methods", nargs="+", help="beside nonprivate (default: ours opacus_ghost)")
    parts = ["bound", "operations", "noise", "noise_kernel", "bench", "ratios", "dp_mae", "coco", "dp_finetune",
             "ade20k", "profile"]  # fmt: skip
    parser.add_argument("--parts", nargs="+", default=parts, choices=parts)
    args = parser.parse_args()
    if args.device == "cpu":  # the fused noise kernel then runs in Triton's interpreter
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("paper_steps: no CUDA device here")
    out = Path(args.out)
    work = Path(args.work) if args.work else out / "work"
    work.mkdir(parents=True, exist_ok=True)
    report: dict = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu"}
    report["torch"] = torch.__version__
    checkpoint = None

    def save() -> None:
        (out / "paper_steps.json").write_text(json.dumps(report, indent=1, default=str) + "\n")

    for part in args.parts:
        began = time.perf_counter()
        try:
            if part == "bench":
                shapes = [(p, int(b), int(m)) for p, b, m in (shape.split(":") for shape in args.bench_shapes or [])]
                report["bench"] = dp_speed.bench_shapes(
                    out, args.device, args.tiny, args.before, shapes, args.bench_methods
                )
            elif part == "ratios":
                report["ratios"] = dp_speed.job_ratios(args.device, args.tiny)
            elif part == "bound":
                report["bound"] = dp_speed.bound(args.device, args.tiny)
            elif part == "operations":
                report["operations"] = dp_speed.operations(args.device, args.tiny)
            elif part == "noise_kernel":
                report["noise_kernel"] = dp_speed.noise_kernel(args.device, args.tiny)
            elif part == "dp_mae":
                report["dp_mae"], checkpoint = dp_mae(work, args.device, args.tiny)
            elif part == "dp_finetune":
                report["dp_finetune"] = dp_finetune(work, args.device, args.tiny, args.finetune_batch, checkpoint)
            elif part == "coco":
                report["coco"] = coco(work, args.device, args.tiny, checkpoint)
            elif part == "ade20k":
                report["ade20k"] = ade20k(work, args.device, args.tiny, checkpoint)
            elif part == "noise":
                report["noise"] = noise(args.device, args.tiny)
            elif part == "profile":
                report["profile"] = profile(out, args.device, args.tiny)
        except Exception as err:  # one part failing must not lose the others' numbers
            report[part] = {"error": f"{type(err).__name__}: {err}"}
        print(f"{part}: {time.perf_counter() - began:.1f} s: {json.dumps(report.get(part), default=str)[:1500]}")
        save()
    return 1 if any(isinstance(v, dict) and "error" in v for v in report.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
