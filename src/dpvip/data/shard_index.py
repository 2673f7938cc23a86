"""An index of LAION-format webdataset shards: ours, img2dataset's, or an existing download.

`index.json` lists each shard (file, samples, bytes, optional sha256) and names its member
table: `members/<position>-<stem>.json` beside the index, {key: {extension: [offset, size]}},
which `ShardReader` reads instead of scanning the tar headers. One small file per shard keeps
a 233M-sample index readable (the index itself stays a few MB). Shard paths are relative to
the index's folder when the shards live under it, absolute otherwise, so a read-only LAION
download can be indexed where it lies.

When img2dataset's `<stem>_stats.json` lies beside a shard, its counts go into the index:
how many URLs were attempted, how many failed, and why.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from dpvip.data.shard_reader import member_table, members_record, sample_hashes
from dpvip.errors import DpvipInputError, first_line
from dpvip.files import sha256, write_json

MEMBERS_FOLDER = "members"
# img2dataset's error messages can carry object addresses ("<_io.BytesIO object at 0x7f...>"):
# dropped so that the same failures give the same index.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def find_shards(source: str | Path | list[str | Path]) -> list[Path]:
    """The `.tar` files of a folder (sorted by name), or the given list of files."""
    if isinstance(source, (list, tuple)):
        paths = [Path(path) for path in source]
        missing = [str(path) for path in paths if not path.is_file()]
        if missing:
            raise DpvipInputError(f"shard {missing[0]} does not exist ({len(missing)} of {len(paths)} missing)")
        return paths
    folder = Path(source)
    if not folder.is_dir():
        raise DpvipInputError(f"shard folder {folder} does not exist")
    paths = sorted(folder.glob("*.tar"))
    if not paths:
        raise DpvipInputError(f"shard folder {folder} holds no .tar shards")
    return paths


def _index_relative(path: Path, folder: Path) -> str:
    """`path` as the index records it: relative to the index's folder when under it."""
    path, folder = path.resolve(), folder.resolve()
    return str(path.relative_to(folder)) if path.is_relative_to(folder) else str(path)


def _download_stats(shard: Path) -> dict | None:
    """img2dataset's stats for `shard` ({count, successes, failed_to_download,
    failed_to_resize, status_dict}), or None when it has none."""
    path = shard.with_name(shard.stem + "_stats.json")
    if not path.is_file():
        return None
    try:
        stats = json.loads(path.read_text())
        return {
            key: stats[key] for key in ("count", "successes", "failed_to_download", "failed_to_resize", "status_dict")
        }
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise DpvipInputError(f"download stats {path} cannot be read: {first_line(err)}") from None


def _failures(stats: list[dict]) -> dict:
    reasons: Counter = Counter()
    for shard_stats in stats:
        for status, count in shard_stats["status_dict"].items():
            if status != "success":
                reasons[_ADDRESS.sub("", status)] += count
    return {
        "count": sum(s["failed_to_download"] + s["failed_to_resize"] for s in stats),
        "failed_to_download": sum(s["failed_to_download"] for s in stats),
        "failed_to_resize": sum(s["failed_to_resize"] for s in stats),
        "reasons": dict(sorted(reasons.items(), key=lambda item: (-item[1], item[0]))),
    }


def _shard_entry(position: int, shard: Path, index_folder: Path, checksums: bool) -> dict:
    """Scan one shard, write its member table, and return its index entry."""
    table = member_table(shard)
    size = shard.stat().st_size
    members = f"{MEMBERS_FOLDER}/{position:06d}-{shard.stem}.json"
    hashes = sample_hashes(shard, table) if checksums else None  # checked on every read
    write_json(members_record(table, size, hashes), index_folder / members)
    entry = {"file": _index_relative(shard, index_folder), "samples": len(table), "bytes": size, "members": members}
    if checksums:
        entry["sha256"] = sha256(shard)
    return entry


def index_shards(
    shards: list[str | Path],
    index_path: str | Path,
    dataset: str,
    source: str,
    location: str | None = None,
    checksums: bool = True,
    expected_samples: list[int] | None = None,
    extra: dict | None = None,
    threads: int = 1,
    progress: bool = True,
) -> dict:
    """Write the index of `shards` (in this order) and their member tables; return the index.

    With `checksums` each shard's SHA-256 and each sample's (checked on every read, so an
    example changed after indexing stops the job) are recorded; `checksums=False` records
    sizes only (hashing terabytes of LAION takes hours), and a same-size edit then goes unseen;
    `expected_samples` refuses shards holding other counts; `extra` adds dataset fields;
    `threads` shards are read at once (reading tar headers mostly waits on the disk).
    """
    index_path = Path(index_path)
    shards = [Path(path) for path in shards]
    if expected_samples is not None and len(expected_samples) != len(shards):
        raise DpvipInputError(
            f"dataset '{dataset}' has {len(expected_samples)} shards; {len(shards)} were given to index"
        )
    with ThreadPoolExecutor(threads) as pool:
        scanned = pool.map(lambda place: _shard_entry(*place, index_path.parent, checksums), enumerate(shards))
        bar = tqdm(
            scanned, total=len(shards), desc=f"index {dataset}", unit="shard", disable=not progress, mininterval=2
        )
        entries = list(bar)
    for shard, entry, expected in zip(shards, entries, expected_samples or [None] * len(shards), strict=True):
        if expected is not None and entry["samples"] != expected:
            raise DpvipInputError(
                f"shard {shard} holds {entry['samples']} samples; dataset '{dataset}' expects {expected}"
            )
    stats = [found for found in map(_download_stats, shards) if found is not None]
    total, failures = sum(entry["samples"] for entry in entries), _failures(stats)
    index = {
        "dataset": dataset,
        "source": source,
        "location": location,
        **(extra or {}),
        "checksums": checksums,
        "shards": entries,
        "total_samples": total,
        "attempted": total + failures["count"],
        "failures": failures,
    }
    # Written last: a reader never meets an index whose member tables are not all there.
    write_json(index, index_path)
    _remove_stale_members(index, index_path)
    return index


def summary(index: dict) -> str:
    """One line: samples, shards, failures and the commonest reasons."""
    failures = index["failures"]
    line = f"{index['total_samples']} samples in {len(index['shards'])} shards"
    if failures["count"]:
        reasons = ", ".join(f"{reason} ({count})" for reason, count in list(failures["reasons"].items())[:3])
        line += f"; {failures['count']} of {index['attempted']} failed: {reasons}"
    return line


def _remove_stale_members(index: dict, index_path: Path) -> None:
    """Delete member tables of an earlier index of this folder that this one no longer names."""
    named = {entry["members"] for entry in index["shards"]}
    for path in (index_path.parent / MEMBERS_FOLDER).glob("*.json"):
        if f"{MEMBERS_FOLDER}/{path.name}" not in named:
            path.unlink()
