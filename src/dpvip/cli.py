"""The `dpvip` command line: privacy accounting, synthetic data, pre-training,
benchmarks, bundle checks.

Bad input prints one line `dpvip: error: ...` and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from dpvip.data.cli import add_data_commands
from dpvip.randp.cli import add_dprandp_commands
from dpvip.errors import DpvipInputError
from dpvip.privacy import ACCOUNTANTS as ACCOUNTANT_CHOICES

# Accounting imports torch (through opacus); it is loaded only by the commands that need it.

EXIT_BAD_INPUT = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse, but errors are a single line (no usage dump) and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def _broadcast(values: list, count: int, flag: str) -> list:
    if len(values) == count:
        return values
    if len(values) == 1:
        return values * count
    raise DpvipInputError(f"{flag} is given {len(values)} times; give it once or {count} times")


def _mechanisms(args: argparse.Namespace) -> list:
    from dpvip.privacy.accounting import Mechanism

    count = max(len(args.noise_multiplier), len(args.steps), len(args.sample_rate))
    rates = _broadcast(args.sample_rate, count, "--sample-rate")
    sigmas = _broadcast(args.noise_multiplier, count, "--noise-multiplier")
    steps = _broadcast(args.steps, count, "--steps")
    return [Mechanism(q, s, t) for q, s, t in zip(rates, sigmas, steps)]


def _print(record: dict, as_json: bool, headline: str) -> None:
    if as_json:
        print(json.dumps(record, sort_keys=True))
    else:
        print(headline)


def cmd_epsilon(args: argparse.Namespace) -> int:
    from dpvip.privacy.accounting import epsilon

    mechanisms = _mechanisms(args)
    spent = epsilon(mechanisms, args.delta, args.accountant)
    record = asdict(spent) | {"mechanisms": [asdict(m) for m in mechanisms]}
    _print(record, args.json, f"epsilon = {spent.epsilon:.6g} at delta = {spent.delta:g} ({spent.method})")
    return 0


def cmd_sigma(args: argparse.Namespace) -> int:
    from dpvip.privacy.accounting import noise_multiplier

    found = noise_multiplier(args.sample_rate, args.steps, args.epsilon, args.delta, args.accountant)
    record = asdict(found) | {"sample_rate": args.sample_rate, "steps": args.steps}
    _print(
        record,
        args.json,
        f"noise multiplier = {found.noise_multiplier:.6g} spends epsilon = {found.epsilon:.6g} "
        f"at delta = {found.delta:g} ({found.method})",
    )
    return 0


def cmd_bundle_verify(args: argparse.Namespace) -> int:
    from dpvip.report.bundle import verify_bundle

    if not Path(args.directory).is_dir():
        raise DpvipInputError(f"bundle directory {args.directory} does not exist")
    result = verify_bundle(args.directory)
    for name in result.missing:
        print(f"missing: {name}")
    for name in result.changed:
        print(f"changed: {name}")
    for name in result.unlisted:
        print(f"not in manifest (ignored): {name}")
    if result.ok:
        print(f"bundle {args.directory}: every file matches its hash")
        return 0
    return 1


def _option(text: str) -> tuple[str, int | float]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"option {text!r} is not KEY=VALUE")
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"option {key} needs a number (got {value!r})") from None
    return key, int(number) if number.is_integer() and "." not in value else number


def cmd_synthetic_generate(args: argparse.Namespace) -> int:
    from dpvip.files import write_json
    from dpvip.synthetic.shards import build_index, claim_folder, shard_name, write_shard
    from dpvip.synthetic.spec import DatasetSpec

    values = {
        "family": args.family,
        "images": args.images,
        "resolution": args.resolution,
        "shard_size": args.shard_size,
        "seed": args.seed,
        "encoding": args.encoding,
        "options": dict(args.option),
    }
    spec = DatasetSpec.from_config(args.name or args.family, values)
    out = Path(args.out)
    claim_folder(spec, out)
    for shard in args.shards if args.shards is not None else range(spec.shards):
        path = out / shard_name(shard)
        if path.exists():  # shards are written atomically: one that exists is complete
            print(f"{path}: exists, kept")
            continue
        write_shard(spec, shard, path, device=args.device)
    paths = [out / shard_name(shard) for shard in range(spec.shards)]
    if all(path.exists() for path in paths):
        write_json(build_index(spec, paths), out / "index.json")
        print(f"{out / 'index.json'}: {spec.images} images in {spec.shards} shards")
    return 0


def cmd_bench_synthetic(args: argparse.Namespace) -> int:
    from dpvip.synthetic.bench import format_rows, rows_as_records, run_bench

    rows = run_bench(args.families, args.resolutions, args.images, args.processes)
    print(json.dumps(rows_as_records(rows)) if args.json else format_rows(rows))
    return 0


def cmd_bench_dp_step(args: argparse.Namespace) -> int:
    from dpvip.models import MAESettings, mae_variant

    size, decoder_depth = mae_variant(args.model)  # bad names fail before torch is imported
    MAESettings(size, image_size=args.image_size, patch_size=args.patch_size, decoder_depth=decoder_depth).check()
    from dpvip.privacy.bench import BenchSetup, format_result, run_bench

    setup = BenchSetup(args.model, args.image_size, args.patch_size, args.batch, args.micro_batch, args.device)
    result = run_bench(setup, args.methods, args.rounds, args.warmup, args.threads, args.memory)
    print(json.dumps(result.record(), sort_keys=True) if args.json else format_result(result))
    return 0


def cmd_bench_workflow(args: argparse.Namespace) -> int:
    from dpvip.report.workflow_bench import bench_workflow, format_summary

    summary = bench_workflow(args.directory, args.out)
    print(json.dumps(summary) if args.json else format_summary(summary))
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (got {text})")
    return value


def _command_group(commands, name: str, help: str):
    """`dpvip NAME ...`: a command whose subcommands are added to what this returns."""
    group = commands.add_parser(name, help=help)
    return group.add_subparsers(dest=f"{name}_command", required=True, parser_class=OneLineParser)


def _add_synthetic(commands) -> None:
    from dpvip.synthetic import FAMILIES

    synthetic_commands = _command_group(commands, "synthetic", "synthetic images from random processes")
    generate = synthetic_commands.add_parser(
        "generate",
        help="write a synthetic dataset as webdataset shards plus index.json",
        description="Existing shards are kept (they are written atomically), so a rerun resumes.",
    )
    generate.add_argument("--family", choices=FAMILIES, required=True)
    generate.add_argument("--images", type=int, required=True)
    generate.add_argument("--resolution", type=int, required=True)
    generate.add_argument("--shard-size", type=int, default=1000)
    generate.add_argument("--seed", type=int, default=0)
    generate.add_argument("--encoding", default="png")
    generate.add_argument(
        "--option",
        type=_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a family option, e.g. programs=21000, mix=6, rebuild_every=400",
    )
    generate.add_argument("--name", help="dataset name recorded in the samples (default: the family)")
    generate.add_argument("--shards", type=int, nargs="+", help="only these shard numbers")
    generate.add_argument("--device", default="cpu")
    generate.add_argument("--out", required=True, help="output folder")
    generate.set_defaults(handler=cmd_synthetic_generate)


def _read_settings(path: str, settings_class, size: str):
    import yaml

    path = Path(path)
    if not path.is_file():
        raise DpvipInputError(f"settings file {path} does not exist")
    return settings_class.from_config(yaml.safe_load(path.read_text()) or {}, size)


def _train(args: argparse.Namespace, command: list[str], check_split, train) -> int:
    """Run `train()` here, or relaunch `command` (this command) under torchrun with --procs N."""
    from dpvip.train.launch import run_torchrun

    if args.procs > 1 and "WORLD_SIZE" not in os.environ:
        check_split(args.procs)
        forwarded = [*command, "--settings", args.settings, "--size", args.size, "--data", args.data, "--out", args.out]
        if getattr(args, "init", None):
            forwarded += ["--init", args.init]
        try:
            run_torchrun(args.procs, forwarded)
        except RuntimeError as err:  # the ranks have printed their own errors above
            print(f"dpvip: error: {err}", file=sys.stderr)
            return 1
        return 0
    record = train()
    if os.environ.get("RANK", "0") == "0":
        privacy = record.get("privacy")
        spent = f", epsilon {privacy['epsilon_spent']:.3f} at delta {privacy['delta']:.3g}" if privacy else ""
        print(
            f"{args.out}/model.pt: {record['steps']} steps, {record['images_seen']} images, {record['skipped_samples']} skipped{spent}"
        )
    return 0


def cmd_pretrain_mae(args: argparse.Namespace) -> int:
    from dpvip.train.mae_pretrain import pretrain_mae
    from dpvip.train.settings import PretrainSettings

    settings = _read_settings(args.settings, PretrainSettings, args.size)
    return _train(args, ["pretrain", "mae"], settings.check_split, lambda: pretrain_mae(settings, args.data, args.out))


def cmd_pretrain_dp_mae(args: argparse.Namespace) -> int:
    from dpvip.train.dp_mae import dp_train_mae
    from dpvip.train.dp_settings import DPPretrainSettings

    settings = _read_settings(args.settings, DPPretrainSettings, args.size)
    return _train(
        args, ["pretrain", "dp-mae"], lambda procs: None, lambda: dp_train_mae(settings, args.data, args.out, args.init)
    )


def _training_arguments(parser, settings_keys: str) -> None:
    from dpvip.models import MAE_SIZES

    parser.add_argument(
        "--settings",
        required=True,
        help=f"YAML/JSON of training settings (keys of {settings_keys} in config/schema.yaml)",
    )
    parser.add_argument("--size", required=True, help=f"MAE size ({', '.join(MAE_SIZES)}) or <size>_dec<depth>")
    parser.add_argument("--data", required=True, help="index.json of the training shards")
    parser.add_argument("--out", required=True, help="run folder")
    parser.add_argument(
        "--procs", type=_positive_int, default=1, help="processes (GPUs) on this node, launched with torchrun"
    )


def _add_pretrain(commands) -> None:
    pretrain_commands = _command_group(commands, "pretrain", "MAE pre-training, non-private and DP")
    mae = pretrain_commands.add_parser(
        "mae",
        help="masked-autoencoder pre-training on webdataset shards ((Syn)-ViP)",
        description="Resumes from OUT/work/state.pt if present; writes OUT/model.pt and OUT/metrics.jsonl.",
    )
    _training_arguments(mae, "pretrain.syn_vip")
    mae.set_defaults(handler=cmd_pretrain_mae)
    dp_mae = pretrain_commands.add_parser(
        "dp-mae",
        help="DP masked-autoencoder training with Poisson sampling and DP-AdamW (ViP)",
        description="Calibrates sigma for (epsilon, delta, q, T), then trains; resumes from OUT/work/state.pt "
        "(refusing another q, sigma or C); writes OUT/model.pt (with the privacy ledger) and OUT/metrics.jsonl.",
    )
    _training_arguments(dp_mae, "dp_pretrain.settings")
    dp_mae.add_argument(
        "--init", help="MAE checkpoint to start from (a (Syn)-ViP model.pt); default: random initialisation"
    )
    dp_mae.set_defaults(handler=cmd_pretrain_dp_mae)


def _add_bench(commands) -> None:
    from dpvip.synthetic import FAMILIES

    bench_commands = _command_group(commands, "bench", "benchmarks (ratios measured side by side in one run)")
    synthetic = bench_commands.add_parser("synthetic", help="images/s per synthetic family and resolution")
    synthetic.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    synthetic.add_argument("--resolutions", nargs="+", type=_positive_int, default=[32, 64, 128, 256])
    synthetic.add_argument("--images", type=_positive_int, default=96, help="images per measurement")
    synthetic.add_argument("--processes", type=_positive_int, default=2, help="worker processes for the split run")
    synthetic.add_argument("--json", action="store_true")
    synthetic.set_defaults(handler=cmd_bench_synthetic)
    dp_step = bench_commands.add_parser(
        "dp-step",
        help="time and peak memory of DP training steps against the non-private step",
        description="Methods: nonprivate, ours (ClippedGradientSum), vmap (torch.func over the whole model), "
        "opacus_hooks, opacus_ghost; each a full AdamW step on the same model, batch and mask noise.",
    )
    dp_step.add_argument("--model", default="micro", help="MAE size, or <size>_dec<depth>")
    dp_step.add_argument("--image-size", type=_positive_int, default=32)
    dp_step.add_argument("--patch-size", type=_positive_int, default=4)
    dp_step.add_argument("--batch", type=_positive_int, default=64)
    dp_step.add_argument(
        "--micro-batch", type=_positive_int, default=None, help="split the batch for the DP methods (default: one pass)"
    )
    dp_step.add_argument("--rounds", type=_positive_int, default=5, help="timed round-robin rounds (median reported)")
    dp_step.add_argument("--warmup", type=int, default=1, help="untimed steps per method first")
    dp_step.add_argument("--threads", type=_positive_int, default=1)
    dp_step.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    dp_step.add_argument(
        "--memory",
        choices=["live", "rss"],
        default="live",
        help="CPU peak memory: live tensor bytes (glibc mmap threshold fixed) or raw RSS with allocator slack",
    )
    dp_step.add_argument(
        "--methods",
        nargs="+",
        default=["nonprivate", "ours", "vmap", "opacus_hooks", "opacus_ghost"],
        help="nonprivate is always run (the ratios' base)",
    )
    dp_step.add_argument("--json", action="store_true")
    dp_step.set_defaults(handler=cmd_bench_dp_step)
    workflow = bench_commands.add_parser(
        "workflow",
        help="where the last workflow run's time went: per stage, the slowest jobs, start-up share",
        description="Reads results/benchmarks and results/logs of the last Snakemake run in DIRECTORY and writes "
        "results/benchmarks/workflow.json.",
    )
    workflow.add_argument("--directory", default=".", help="the workflow's working directory (default: here)")
    workflow.add_argument("--out", help="where to write the summary (default: results/benchmarks/workflow.json)")
    workflow.add_argument("--json", action="store_true")
    workflow.set_defaults(handler=cmd_bench_workflow)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="dpvip", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    privacy_commands = _command_group(commands, "privacy", "privacy accounting")
    common = OneLineParser(add_help=False)
    common.add_argument("--delta", type=float, required=True)
    common.add_argument("--accountant", choices=ACCOUNTANT_CHOICES, default="rdp")
    common.add_argument("--json", action="store_true", help="print one JSON object")

    eps = privacy_commands.add_parser(
        "epsilon",
        parents=[common],
        help="epsilon spent by one or more (sample rate, sigma, steps) mechanisms",
        description="Repeat --noise-multiplier/--steps/--sample-rate to compose several "
        "mechanisms (a flag given once applies to all).",
    )
    eps.add_argument("--sample-rate", type=float, action="append", required=True)
    eps.add_argument("--noise-multiplier", type=float, action="append", required=True)
    eps.add_argument("--steps", type=int, action="append", required=True)
    eps.set_defaults(handler=cmd_epsilon)

    sigma = privacy_commands.add_parser("sigma", parents=[common], help="noise multiplier for a budget")
    sigma.add_argument("--sample-rate", type=float, required=True)
    sigma.add_argument("--steps", type=int, required=True)
    sigma.add_argument("--epsilon", type=float, required=True)
    sigma.set_defaults(handler=cmd_sigma)

    bundle_commands = _command_group(commands, "bundle", "results bundle")
    verify = bundle_commands.add_parser("verify", help="check every file against MANIFEST.sha256")
    verify.add_argument("directory")
    verify.set_defaults(handler=cmd_bundle_verify)
    _add_synthetic(commands)
    _add_pretrain(commands)
    _add_bench(commands)
    add_data_commands(commands)
    add_dprandp_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except DpvipInputError as err:
        print(f"dpvip: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
