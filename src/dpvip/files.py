"""File helpers shared by the stages: content hashes and Snakemake benchmark records."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path


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
    return {"seconds": float(last["s"]), "max_rss_mb": float(last["max_rss"]) if last.get("max_rss", "NA") != "NA" else None}
