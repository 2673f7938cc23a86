"""The `dpvip` command line: privacy accounting, synthetic data, LAION-format data,
pre-training, evaluations, DP-RandP, benchmarks, the compute budget, bundle checks. One
module per command group.

Bad input prints one line `dpvip: error: ...` and exits with status 2, and so does a command
that needs an extra which is not installed (`pip install dpvip` installs the DP engine and
its accounting; the line names the extra).
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata

from dpvip.cli import bench, budget, bundle, data, dprandp, evaluate, pretrain, privacy, synthetic
from dpvip.cli._common import EXIT_BAD_INPUT, OneLineParser, missing_extra
from dpvip.errors import DpvipInputError, one_line

GROUPS = (privacy, bundle, synthetic, pretrain, evaluate, bench, budget, data, dprandp)  # in `dpvip --help` order


def version() -> str:
    """dpvip's version, from the installed package's metadata (pyproject.toml's `version`)."""
    try:
        return metadata.version("dpvip")
    except metadata.PackageNotFoundError:  # imported from a checkout that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="dpvip", description=__doc__)
    parser.add_argument("--version", action="version", version=f"dpvip {version()}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for group in GROUPS:
        group.add_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except DpvipInputError as err:
        print(f"dpvip: error: {one_line(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ModuleNotFoundError as err:
        advice = missing_extra(err.name or "")
        if advice is None:
            raise
        command = " ".join(filter(None, (args.command, getattr(args, f"{args.command}_command", None))))
        print(f"dpvip: error: dpvip {command} {advice}", file=sys.stderr)
        return EXIT_BAD_INPUT
