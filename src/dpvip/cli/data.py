"""`dpvip data ...`: the LAION-format pre-training data (embedded natural-image stand-in,
img2dataset ingestion, indexing existing shards)."""

from __future__ import annotations

import argparse
from pathlib import Path

from dpvip.cli._common import command_group, positive_int


def cmd_natural(args: argparse.Namespace) -> int:
    from dpvip.data.natural import NaturalSpec, write_natural_dataset
    from dpvip.data.shard_index import summary

    spec = NaturalSpec.from_config(
        {"images": args.images, "resolution": args.resolution, "shard_size": args.shard_size, "seed": args.seed}
    )
    index = write_natural_dataset(spec, args.out, checksums=args.checksums)
    print(f"{Path(args.out) / 'index.json'}: {summary(index)} (stand-in for {index['stand_in_for']})")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from dpvip.data.laion import IngestSettings, ingest
    from dpvip.data.shard_index import summary

    settings = IngestSettings(
        image_size=args.image_size,
        resize_mode=args.resize_mode,
        processes=args.processes,
        threads=args.threads,
        shard_size=args.shard_size,
        timeout=args.timeout,
        retries=args.retries,
        url_column=args.url_column,
        caption_column=args.caption_column,
    )
    index = ingest(args.urls, args.out, settings, checksums=args.checksums)
    print(f"{Path(args.out) / 'index.json'}: {summary(index)}")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from dpvip.data.shard_index import find_shards, index_shards, summary

    folder = Path(args.directory)
    index_path = Path(args.out) if args.out else folder / "index.json"
    index = index_shards(
        find_shards(folder),
        index_path,
        dataset=args.name,
        source="shards",
        location=str(folder.resolve()),
        checksums=args.checksums,
        threads=args.threads,
    )
    print(f"{index_path}: {summary(index)}")
    return 0


def add_commands(commands) -> None:
    """`dpvip data natural|ingest|index`, added to the `dpvip` subcommands `commands`."""
    data_commands = command_group(
        commands,
        "data",
        "LAION-format webdataset shards for DP pre-training",
        "dpvip data index /datasets/laion233m/shards --out laion/index.json --no-checksums",
    )
    checksums = argparse.ArgumentParser(add_help=False)
    checksums.add_argument(
        "--no-checksums",
        dest="checksums",
        action="store_false",
        help="record shard sizes instead of SHA-256 (hashing terabytes of LAION takes hours)",
    )

    natural = data_commands.add_parser(
        "natural",
        parents=[checksums],
        help="the embedded stand-in for LAION: crops of scikit-image/scikit-learn photos",
        description="Writes shards, dataset.json and index.json; existing shards are kept "
        "(they are written atomically), so a rerun resumes.",
    )
    natural.add_argument("--out", required=True, help="output folder")
    natural.add_argument("--images", type=positive_int, required=True, help="crops in the dataset")
    natural.add_argument("--resolution", type=positive_int, required=True, help="crop side in pixels")
    natural.add_argument("--shard-size", type=positive_int, default=512, help="images per shard")
    natural.add_argument("--seed", type=int, default=0, help="seed of the crops")
    natural.set_defaults(handler=cmd_natural)

    ingest = data_commands.add_parser(
        "ingest",
        parents=[checksums],
        help="download a URL list with img2dataset into shards, then index them",
        description="Writes OUT/shards/ (img2dataset's shards and stats) "
        "and OUT/index.json with the download's failures.",
    )
    ingest.add_argument(
        "--urls", required=True, help="URL list: parquet, csv, tsv, txt or json file, or a folder of them"
    )
    ingest.add_argument("--out", required=True, help="output folder")
    ingest.add_argument("--image-size", type=positive_int, default=256, help="img2dataset's output side in pixels")
    ingest.add_argument("--resize-mode", default="keep_ratio", help="keep_ratio, border, center_crop, ...")
    ingest.add_argument("--processes", type=positive_int, default=1, help="img2dataset download processes")
    ingest.add_argument("--threads", type=positive_int, default=8, help="download threads per process")
    ingest.add_argument("--shard-size", type=positive_int, default=10000, help="URLs per shard")
    ingest.add_argument("--timeout", type=positive_int, default=10, help="seconds per download")
    ingest.add_argument("--retries", type=int, default=0, help="retries per failed download")
    ingest.add_argument("--url-column", default="url", help="LAION-400M parquet: URL")
    ingest.add_argument("--caption-column", default="caption", help="used when present; LAION-400M parquet: TEXT")
    ingest.set_defaults(handler=cmd_ingest)

    index = data_commands.add_parser(
        "index",
        parents=[checksums],
        help="index a folder of webdataset shards (member tables beside the index)",
    )
    index.add_argument("directory", help="folder of .tar shards")
    index.add_argument(
        "--out", help="index.json to write (default: DIRECTORY/index.json; elsewhere for read-only shards)"
    )
    index.add_argument("--name", default="laion", help="dataset name recorded in the index")
    index.add_argument(
        "--threads", type=positive_int, default=8, help="shards read in parallel (helps on network file systems)"
    )
    index.set_defaults(handler=cmd_index)
