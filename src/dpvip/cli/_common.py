"""What every `dpvip` command group shares: one-line errors with exit status 2 (a missing
extra's too), command groups, argument types, printing a record as text or JSON,
relaunching under torchrun."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from importlib import metadata

EXIT_BAD_INPUT = 2
# Modules whose distribution has another name: the extra that installs them is looked up by it.
DISTRIBUTIONS = {
    "yaml": "pyyaml",
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "PIL": "pillow",
    "cv2": "opencv-python-headless",
    "exifread": "exifread-nocycle",
    "snakemake_interface_common": "snakemake",
    "snakemake_interface_executor_plugins": "snakemake",
}
EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_extra(module: str, requirements: list[str] | None = None) -> str | None:
    """What a command that could not import `module` lacks, on one line: the module's
    distribution and the extras of dpvip that install it (read from `requirements`, by default
    the installed dpvip's); None where no extra lists it (then its absence is a real error)."""
    top = module.partition(".")[0]
    distribution = DISTRIBUTIONS.get(top, top)
    if requirements is None:
        try:
            requirements = metadata.requires("dpvip") or []
        except metadata.PackageNotFoundError:
            return None
    extras = set()
    for requirement in requirements:
        name = re.split(r"[<>=!~ \[;(]", requirement.strip(), maxsplit=1)[0]
        marker = EXTRA_MARKER.search(requirement)
        if marker and canonical(name) == canonical(distribution):
            extras.add(marker.group(1))
    if not extras:
        return None
    which = " or ".join(f"'{extra}'" for extra in sorted(extras))
    return f"needs {distribution}, which the {which} extra installs: pip install 'dpvip[{min(extras)}]'"


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
