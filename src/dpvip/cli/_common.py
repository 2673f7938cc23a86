"""What every `dpvip` command group shares: one-line errors with exit status 2, command
groups, argument types, printing a record as text or JSON, relaunching under torchrun."""

from __future__ import annotations

import argparse
import json
import os
import sys

EXIT_BAD_INPUT = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse, but errors are a single line (no usage dump) and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def command_group(commands, name: str, help: str):
    """`dpvip NAME ...`: a command whose subcommands are added to what this returns."""
    group = commands.add_parser(name, help=help)
    return group.add_subparsers(dest=f"{name}_command", required=True, parser_class=OneLineParser)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (got {text})")
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
