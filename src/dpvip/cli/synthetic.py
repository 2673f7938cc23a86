"""`dpvip synthetic generate`: a synthetic dataset as webdataset shards and an index."""

from __future__ import annotations

import argparse
from pathlib import Path

from dpvip.cli._common import command_group


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


def add_commands(commands) -> None:
    from dpvip.synthetic import GENERATED_FAMILIES

    synthetic_commands = command_group(
        commands,
        "synthetic",
        "synthetic images from random processes",
        "dpvip synthetic generate --family dead_leaves --images 256 --resolution 32 --shard-size 128 --out dl",
    )
    generate = synthetic_commands.add_parser(
        "generate",
        help="write a synthetic dataset as webdataset shards plus index.json",
        description="Existing shards are kept (they are written atomically), so a rerun resumes.",
    )
    generate.add_argument("--family", choices=GENERATED_FAMILIES, required=True, help="the random process")
    generate.add_argument("--images", type=int, required=True, help="images in the dataset")
    generate.add_argument("--resolution", type=int, required=True, help="image side in pixels")
    generate.add_argument("--shard-size", type=int, default=1000, help="images per shard")
    generate.add_argument("--seed", type=int, default=0, help="the dataset's seed (each image is seeded from it)")
    generate.add_argument("--encoding", default="png", help="image format in the shards: png or jpg")
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
    generate.add_argument("--device", default="cpu", help="torch device the generator runs on (cpu, cuda)")
    generate.add_argument("--out", required=True, help="output folder")
    generate.set_defaults(handler=cmd_synthetic_generate)
