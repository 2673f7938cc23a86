"""What every `dpvip` command group shares: one-line errors with exit status 2, command
groups, argument types, printing a record as text or JSON, relaunching under torchrun."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

EXIT_BAD_INPUT = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse, but errors are a single line (no usage dump) and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def with_example(example: str) -> dict:
    """Parser keywords whose help ends with an example command (kept as written)."""
    return {"epilog": f"example:\n  {example}", "formatter_class": argparse.RawDescriptionHelpFormatter}


def command_group(commands, name: str, help: str, example: str):
    """`dpvip NAME ...`: a command whose subcommands are added to what this returns; its
    help ends with `example`."""
    group = commands.add_parser(name, help=help, description=help, **with_example(example))
    return group.add_subparsers(dest=f"{name}_command", required=True, parser_class=OneLineParser)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (got {text})")
    return value


def positive_float(text: str) -> float:
    """A finite value that must be above 0 (an epsilon, a noise multiplier, a clipping norm)."""
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number (got {text})")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive (got {text})")
    return value


def open_unit_interval(text: str) -> float:
    """A value strictly between 0 and 1 (a delta, a confidence)."""
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, both excluded (got {text})")
    return value


def sample_rate(text: str) -> float:
    """A Poisson sampling rate q in (0, 1]."""
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1] (got {text})")
    return value


def print_record(record: dict, as_json: bool, headline: str) -> None:
    if as_json:
        print(json.dumps(record, sort_keys=True))
    else:
        print(headline)


def relaunched(procs: int, forwarded: list[str]) -> int | None:
    """With --procs N > 1 outside torchrun: run `dpvip FORWARDED` as N processes and return
    the exit status; None when this process is to do the work itself (one process, or a rank)."""
    if procs <= 1 or "WORLD_SIZE" in os.environ:
        return None
    from dpvip.train.launch import run_torchrun

    try:
        run_torchrun(procs, forwarded)
    except RuntimeError as err:  # the ranks have printed their own errors above
        print(f"dpvip: error: {err}", file=sys.stderr)
        return 1
    return 0
