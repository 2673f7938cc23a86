"""`dpvip bench synthetic|dp-step|dp-ops|workflow`: ratios measured side by side in one run."""

from __future__ import annotations

import argparse
import json

from dpvip.cli._common import command_group, positive_int
from dpvip.errors import DpvipInputError


def cmd_bench_synthetic(args: argparse.Namespace) -> int:
    from dpvip.synthetic.bench import format_rows, rows_as_records, run_bench

    rows = run_bench(args.families, args.resolutions, args.images, args.processes)
    print(json.dumps(rows_as_records(rows)) if args.json else format_rows(rows))
    return 0


DP_STEP_DEFAULTS = {
    "model": "micro",
    "image_size": 32,
    "patch_size": 4,
    "batch": 64,
    "micro_batch": None,
    "device": "cpu",
    "precision": "fp32",
}
# Named shapes. vip-base: ViP-Base (MAE base as registered) at 224 px and patch 16 in
# micro-batches of 32, the per-GPU pass of ViP's pre-training; the preset takes 4 micro-
# batches, to stay within minutes on a CPU. paper: one GPU's share of a paper step (98,304 /
# 48 GPUs = 2,048 examples, one noise draw) in micro-batches of 256, bf16 on CUDA.
PRESETS = {
    "vip-base": {"model": "base", "image_size": 224, "patch_size": 16, "batch": 128, "micro_batch": 32},
    "paper": {
        "model": "base",
        "image_size": 224,
        "patch_size": 16,
        "batch": 2048,
        "micro_batch": 256,
        "device": "cuda",
        "precision": "bf16",
    },
}


def dp_step_shape(args: argparse.Namespace) -> dict:
    """The model and batch shape: the flags given, else the preset's, else the defaults."""
    preset = PRESETS[args.preset] if args.preset else {}
    shape = {}
    for key, default in DP_STEP_DEFAULTS.items():
        value = getattr(args, key)
        shape[key] = value if value is not None else preset.get(key, default)
    return shape


def cmd_bench_dp_step(args: argparse.Namespace) -> int:
    from dpvip.models import MAESettings, mae_variant

    for key, value in dp_step_shape(args).items():
        setattr(args, key, value)

    size, decoder_depth = mae_variant(args.model)  # bad names fail before torch is imported
    MAESettings(size, image_size=args.image_size, patch_size=args.patch_size, decoder_depth=decoder_depth).check()
    from dpvip.bench import BenchSetup, format_result, run_bench

    setup = BenchSetup(
        args.model,
        args.image_size,
        args.patch_size,
        args.batch,
        args.micro_batch,
        args.device,
        precision=args.precision,
    )
    result = run_bench(setup, args.methods, args.rounds, args.warmup, args.threads, args.memory, args.heap)
    print(json.dumps(result.record(), sort_keys=True) if args.json else format_result(result))
    return 0


def cmd_bench_dp_ops(args: argparse.Namespace) -> int:
    import torch

    from dpvip.bench import BenchSetup
    from dpvip.bench.operations import count_operations, format_counts

    setup = BenchSetup(**dp_step_shape(args))
    setup.settings()  # bad names and sizes fail before anything runs
    if setup.device == "cuda" and not torch.cuda.is_available():
        raise DpvipInputError("device cuda is not available")
    result = count_operations(setup, args.methods, gpu_path=args.gpu_path)
    print(json.dumps(result.record(), sort_keys=True) if args.json else format_counts(result))
    return 0


def cmd_bench_workflow(args: argparse.Namespace) -> int:
    from dpvip.report.jobs.workflow_bench import bench_workflow, format_summary

    summary = bench_workflow(args.directory, args.out)
    print(json.dumps(summary) if args.json else format_summary(summary))
    return 0


def add_shape_arguments(parser: argparse.ArgumentParser) -> None:
    """The model, batch, device and precision of a DP-step benchmark (`dp_step_shape`)."""
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="a named shape (vip-base: MAE base, 224 px, patch 16, batch 128 in micro-batches of 32; paper: "
        "MAE base, 224 px, patch 16, batch 2,048 in micro-batches of 256, bf16 on CUDA); flags given beside it "
        "override it",
    )
    parser.add_argument("--model", help="MAE size, or <size>_dec<depth> (default micro)")
    parser.add_argument("--image-size", type=positive_int, help="default 32")
    parser.add_argument("--patch-size", type=positive_int, help="default 4")
    parser.add_argument("--batch", type=positive_int, help="default 64")
    parser.add_argument(
        "--micro-batch",
        type=positive_int,
        help="split the batch into passes of this size, every method (default: one pass)",
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], help="where the steps run (default cpu)")
    parser.add_argument(
        "--precision",
        choices=["fp32", "bf16"],
        help="bf16: every method's forward passes under bfloat16 autocast, as DP-MAE trains on a GPU (default fp32)",
    )


def add_commands(commands) -> None:
    from dpvip.synthetic import GENERATED_FAMILIES as FAMILIES

    bench_commands = command_group(
        commands,
        "bench",
        "benchmarks (ratios measured side by side in one run)",
        "dpvip bench dp-step --preset vip-base --methods nonprivate ours --threads 2",
    )
    synthetic = bench_commands.add_parser("synthetic", help="images/s per synthetic family and resolution")
    synthetic.add_argument(
        "--families", nargs="+", choices=FAMILIES, default=list(FAMILIES), help="families to time (default: all)"
    )
    synthetic.add_argument(
        "--resolutions", nargs="+", type=positive_int, default=[32, 64, 128, 256], help="image sides in pixels"
    )
    synthetic.add_argument("--images", type=positive_int, default=96, help="images per measurement")
    synthetic.add_argument("--processes", type=positive_int, default=2, help="worker processes for the split run")
    synthetic.add_argument("--json", action="store_true", help="print one JSON object")
    synthetic.set_defaults(handler=cmd_bench_synthetic)
    dp_step = bench_commands.add_parser(
        "dp-step",
        help="time and peak memory of DP training steps against the non-private step",
        description="Methods: nonprivate, ours (ClippedGradientSum), vmap (torch.func over the whole model), "
        "opacus_hooks, opacus_ghost; each a full AdamW step on the same model, batch and mask noise.",
    )
    add_shape_arguments(dp_step)
    dp_step.add_argument("--rounds", type=positive_int, default=5, help="timed round-robin rounds (median reported)")
    dp_step.add_argument("--warmup", type=int, default=1, help="untimed steps per method first")
    dp_step.add_argument("--threads", type=positive_int, default=1, help="torch threads of the timed processes")
    dp_step.add_argument(
        "--memory",
        choices=["live", "rss"],
        default="live",
        help="CPU peak memory: live tensor bytes (glibc mmap threshold fixed) or raw RSS with allocator slack",
    )
    dp_step.add_argument(
        "--heap",
        choices=["kept", "default"],
        default="kept",
        help="CPU heap of the timed processes: freed memory kept and reused (glibc trimming off, as a GPU's "
        "caching allocator) or glibc's defaults, which fault every step's memory in anew",
    )
    dp_step.add_argument(
        "--methods",
        nargs="+",
        default=["nonprivate", "ours", "vmap", "opacus_hooks", "opacus_ghost"],
        help="nonprivate is always run (the ratios' base)",
    )
    dp_step.add_argument("--json", action="store_true", help="print one JSON object")
    dp_step.set_defaults(handler=cmd_bench_dp_step)
    dp_ops = bench_commands.add_parser(
        "dp-ops",
        help="operations a DP training step issues against the non-private step (a GPU step's host work)",
        description="Counts the launching aten operations of one step of each method (after a warm-up step), "
        "in this process; with --gpu-path, on a CPU, those of the path a CUDA device takes.",
    )
    add_shape_arguments(dp_ops)
    dp_ops.add_argument(
        "--gpu-path",
        action="store_true",
        help="on a CPU, count the CUDA path: 16-bit products into float32, the fused ghost norm, foreach AdamW",
    )
    dp_ops.add_argument("--methods", nargs="+", default=["nonprivate", "ours"], help="nonprivate is always counted")
    dp_ops.add_argument("--json", action="store_true", help="print one JSON object")
    dp_ops.set_defaults(handler=cmd_bench_dp_ops)
    workflow = bench_commands.add_parser(
        "workflow",
        help="where the last workflow run's time went: per stage, the slowest jobs, start-up share",
        description="Reads results/benchmarks and results/logs of the last Snakemake run in DIRECTORY and writes "
        "results/benchmarks/workflow.json.",
    )
    workflow.add_argument("--directory", default=".", help="the workflow's working directory (default: here)")
    workflow.add_argument("--out", help="where to write the summary (default: results/benchmarks/workflow.json)")
    workflow.add_argument("--json", action="store_true", help="print one JSON object")
    workflow.set_defaults(handler=cmd_bench_workflow)
