"""Digests of the user's data that the jobs read, as job params: a job reruns when the
contents of a configured folder or file change, not only when its path does.

A folder's digest covers every file under it (its relative path, size and modification
time) and every folder's modification time, so an image added, removed, renamed or rewritten
changes it. Above `STAT_LIMIT` files (ImageNet's 1.28M would cost the plan a minute of
stat calls on a network file system) it covers the names and the folders' modification
times only: an image rewritten in place under the same name then goes unseen, and the
digest says so (`names-only`). A shard index (`index.json`) stands for its whole folder.
Each path is read once per Snakemake process.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

STAT_LIMIT = 100_000  # files under a folder whose sizes and times are read one by one
# The keys of a data config entry (evaluate.datasets, a synthetic set, a DP-RandP task's data, ...) that name paths
PATH_KEYS = ("train", "test", "path", "root", "shards")


@functools.lru_cache(maxsize=None)
def content_digest(path: str) -> str:
    """'sha256:<hex>' of what `path` holds ('missing' when it does not exist: the job will
    say so); 'names-only:<hex>' for a folder of more than STAT_LIMIT files."""
    target = Path(path)
    if target.name == "index.json":  # a shard index: its shards sit beside it
        target = target.parent
    if not target.exists():
        return "missing"
    digest = hashlib.sha256()
    if target.is_file():
        info = target.stat()
        digest.update(f"{target.name}\0{info.st_size}\0{info.st_mtime_ns}".encode())
        return f"sha256:{digest.hexdigest()}"
    files: list[str] = []
    for folder, subfolders, names in os.walk(target):
        subfolders.sort()
        relative = os.path.relpath(folder, target)
        digest.update(f"{relative}/\0{os.stat(folder).st_mtime_ns}\n".encode())
        files += [os.path.join(relative, name) for name in sorted(names)]
    if len(files) > STAT_LIMIT:
        digest.update("\n".join(files).encode())
        return f"names-only:{digest.hexdigest()}"
    for name in files:
        info = os.stat(target / name)
        digest.update(f"{name}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return f"sha256:{digest.hexdigest()}"


def spec_digests(spec: dict | None) -> dict[str, str]:
    """{key: content digest} of every path a data config entry names (none for a stand-in)."""
    return {key: content_digest(str(spec[key])) for key in PATH_KEYS if isinstance((spec or {}).get(key), str)}
