"""File helpers shared by the stages: output folders, atomic writes, content hashes,
Snakemake benchmark records, reading the user's text and JSON files with one-line errors."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from dpvip.errors import DpvipInputError


def writable_target(path: str | Path) -> Path:
    """`path`, once its folder exists and is writable; otherwise a one-line error naming it."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DpvipInputError(f"cannot create output folder {path.parent}: {err.strerror}") from None
    if not os.access(path.parent, os.W_OK):
        raise DpvipInputError(f"output folder {path.parent} is not writable")
    return path


@contextlib.contextmanager
def atomic_target(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path` to write to; when the block succeeds it replaces
    `path` in one step, so a crash leaves the previous file (or none), never a half one."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    try:
        yield partial
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_benchmark(path: str | Path) -> dict | None:
    """Wall seconds and peak RSS (MB) of the last run recorded in a Snakemake `benchmark:` file."""
    with Path(path).open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    if not rows:
        return None
    last = rows[-1]
    return {
        "seconds": float(last["s"]),
        "max_rss_mb": float(last["max_rss"]) if last.get("max_rss", "NA") != "NA" else None,
    }


def read_text(path: str | Path, what: str) -> str:
    """A UTF-8 text file the user gave (`what` names it in the error), or one-line errors."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DpvipInputError(f"{what} {path} does not exist") from None
    except UnicodeDecodeError as err:
        raise DpvipInputError(f"{what} {path} is not UTF-8 text (byte {err.start}: {err.reason})") from None
    except OSError as err:
        raise DpvipInputError(f"{what} {path} cannot be read: {err.strerror}") from None


def read_json(path: str | Path, what: str):
    """A JSON file the user gave, or one line saying why it cannot be read as JSON."""
    try:
        return json.loads(read_text(path, what))
    except json.JSONDecodeError as err:
        raise DpvipInputError(f"{what} {path} is not JSON (line {err.lineno} column {err.colno}: {err.msg})") from None


def write_json(record: dict, path: str | Path) -> None:
    """Write `record` as JSON through a temporary file, so a crash leaves no half file."""
    with atomic_target(writable_target(path)) as partial:
        partial.write_text(json.dumps(record, indent=1) + "\n")


def private_work_dir(out: str | Path) -> Path:
    """The private folder of the job that writes `out` (`<stem>.work` beside it): a DP run's
    resumable state lives there (its secret key in the key store, outside results/), and nothing
    in it is ever published."""
    out = Path(out)
    return out.with_name(out.stem + ".work")
