"""Random access by global index into webdataset tar shards.

A webdataset shard is a plain tar whose members `<key>.<ext>` group into samples. Samples
are numbered across shards in order (shard by shard, keys sorted), so a sample's global
index is stable. Member offsets come from the shard's member table when the index names one
(a small JSON file per shard, written by `dpvip.data.shard_index`), else from the tar headers;
either is read once per shard on first use. Each process opens its own file handles
(DataLoader workers fork), and reads use pread.

A member table written with checksums also holds each sample's SHA-256 (its members' bytes
in extension order), recorded when the shard is indexed; every read checks the sample against
it, so an example replaced after indexing (even by one of the same size, its mtime restored)
stops the job instead of being trained on under the old data's fingerprint and noise.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import tarfile
from pathlib import Path

from dpvip.errors import DpvipInputError, first_line


class CorruptSample(Exception):
    """A sample that cannot be read or decoded; training skips and counts it."""


MemberTable = list[tuple[str, dict[str, tuple[int, int]]]]


def member_table(path: Path) -> MemberTable:
    """[(key, {extension: (offset, size)})] in key order, from the tar headers."""
    samples: dict[str, dict[str, tuple[int, int]]] = {}
    try:
        with tarfile.open(path) as archive:
            for member in archive:
                if not member.isfile():
                    continue
                key, _, extension = Path(member.name).name.partition(".")
                samples.setdefault(key, {})[extension] = (member.offset_data, member.size)
    except (tarfile.TarError, OSError) as err:
        raise DpvipInputError(f"shard {path} cannot be read as a tar file: {first_line(err)}") from None
    return sorted(samples.items())


def sample_digest(sample: dict[str, bytes]) -> str:
    """SHA-256 of a sample's members' bytes, in extension order (names and lengths included)."""
    digest = hashlib.sha256()
    for extension in sorted(name for name in sample if name != "__key__"):
        digest.update(f"{extension}\0{len(sample[extension])}\0".encode())
        digest.update(sample[extension])
    return digest.hexdigest()


def sample_hashes(path: Path, table: MemberTable) -> dict[str, str]:
    """{key: sample_digest} of every sample of the shard at `path` (one read of the shard)."""
    handle = os.open(path, os.O_RDONLY)
    try:
        return {
            key: sample_digest({e: os.pread(handle, size, offset) for e, (offset, size) in members.items()})
            for key, members in table
        }
    finally:
        os.close(handle)


def members_record(table: MemberTable, shard_bytes: int, hashes: dict[str, str] | None = None) -> dict:
    """A member table as JSON: the shard's size (to notice a shard changed since),
    {key: {extension: [offset, size]}} and, when given, each sample's SHA-256."""
    record = {
        "bytes": shard_bytes,
        "samples": {key: {e: list(place) for e, place in members.items()} for key, members in table},
    }
    return record | ({"sha256": hashes} if hashes is not None else {})


def load_members(path: Path, shard: Path) -> MemberTable:
    """The member table of `shard` stored in `path`; refuses one made for another shard size."""
    return load_members_record(path, shard)[0]


def load_members_record(path: Path, shard: Path) -> tuple[MemberTable, dict[str, str] | None]:
    """(member table, each sample's SHA-256 or None when indexed without checksums) of
    `shard` from `path`, read once; refuses one made for another shard size."""
    try:
        record = json.loads(path.read_text())
        recorded, samples, hashes = int(record["bytes"]), record["samples"], record.get("sha256")
        table = sorted(
            (key, {e: (int(o), int(n)) for e, (o, n) in members.items()}) for key, members in samples.items()
        )
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise DpvipInputError(f"member table {path} cannot be read: {first_line(err)}") from None
    size = shard.stat().st_size
    if size != recorded:
        raise DpvipInputError(
            f"shard {shard} has {size} bytes; its member table {path} was made for {recorded} (index it again)"
        )
    return table, hashes


class ShardReader:
    """Samples of `shards` [(path, sample count)] by global index, as {extension: bytes}.

    `members` names each shard's member table (None: read the tar headers)."""

    def __init__(self, shards: list[tuple[str | Path, int]], members: list[str | Path | None] | None = None):
        self.paths = [Path(path) for path, _ in shards]
        self.counts = [int(count) for _, count in shards]
        self.members = [Path(path) if path else None for path in members] if members else [None] * len(self.paths)
        missing = [str(path) for path in self.paths if not path.is_file()]
        if missing:
            raise DpvipInputError(f"shard {missing[0]} is missing ({len(missing)} of {len(self.paths)} shards missing)")
        lost = [str(path) for path in self.members if path is not None and not path.is_file()]
        if lost:
            raise DpvipInputError(f"member table {lost[0]} is missing ({len(lost)} missing; index the shards again)")
        self.starts = [0]
        for count in self.counts:
            self.starts.append(self.starts[-1] + count)
        self.fingerprint: str | None = None  # what the shards hold, when an index names it
        self._tables: dict[int, list] = {}
        self._hashes: dict[int, dict[str, str] | None] = {}
        self._handles: dict[int, int] = {}
        self._pid = os.getpid()

    @classmethod
    def from_index(cls, index_path: str | Path) -> ShardReader:
        """From a dataset's index.json (`shards`: [{file, samples, members (optional)}]); paths
        are relative to the index's folder, or absolute for shards that live elsewhere."""
        index_path = Path(index_path)
        if not index_path.is_file():
            raise DpvipInputError(f"dataset index {index_path} does not exist")
        try:
            shards = json.loads(index_path.read_text())["shards"]
            shard_list = [(index_path.parent / shard["file"], shard["samples"]) for shard in shards]
            members = [index_path.parent / shard["members"] if shard.get("members") else None for shard in shards]
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
            raise DpvipInputError(f"dataset index {index_path} is not a shard index: {first_line(err)}") from None
        reader = cls(shard_list, members)
        reader.fingerprint = reader.content_digest(json.dumps(shards, sort_keys=True))
        return reader

    def content_digest(self, index_text: str) -> str:
        """SHA-256 of the index and of what each shard holds: its size, and its member table
        (every sample's members, offsets and sizes) or, without one, its size alone (a shard
        regenerated byte for byte must not restart the runs that read it). A DP run's noise
        stream depends on it, so a run on changed shards never repeats the noise of the
        first; hashing LAION's terabytes for every run would not do."""
        digest = hashlib.sha256(index_text.encode())
        for path, table in zip(self.paths, self.members):
            info = path.stat()
            held = hashlib.sha256(table.read_bytes()).hexdigest() if table is not None else ""
            digest.update(f"\n{path.name}\0{info.st_size}\0{held}".encode())
        return digest.hexdigest()

    def __len__(self) -> int:
        return self.starts[-1]

    def locate(self, index: int) -> tuple[int, int]:
        """(shard, position within the shard) of global sample `index`."""
        if not 0 <= index < len(self):
            raise IndexError(f"sample {index} is outside 0..{len(self) - 1}")
        shard = bisect.bisect_right(self.starts, index) - 1
        return shard, index - self.starts[shard]

    def _handle(self, shard: int) -> int:
        if self._pid != os.getpid():  # forked into a worker: the parent's descriptors are shared
            self._handles, self._pid = {}, os.getpid()
        if shard not in self._handles:
            self._handles[shard] = os.open(self.paths[shard], os.O_RDONLY)
        return self._handles[shard]

    def __getitem__(self, index: int) -> dict[str, bytes]:
        shard, position = self.locate(index)
        if shard not in self._tables:
            sidecar = self.members[shard]
            if sidecar is None:
                table, hashes = member_table(self.paths[shard]), None
            else:
                table, hashes = load_members_record(sidecar, self.paths[shard])
            if len(table) != self.counts[shard]:
                raise DpvipInputError(
                    f"shard {self.paths[shard]} holds {len(table)} samples; its index says {self.counts[shard]}"
                )
            self._tables[shard] = table
            self._hashes[shard] = hashes
        key, members = self._tables[shard][position]
        handle = self._handle(shard)
        sample = {"__key__": key}
        for extension, (offset, size) in members.items():
            data = os.pread(handle, size, offset)
            if len(data) != size:
                raise CorruptSample(f"{self.paths[shard]}: member {key}.{extension} is truncated")
            sample[extension] = data
        recorded = (self._hashes.get(shard) or {}).get(key)
        if recorded is not None and sample_digest(sample) != recorded:
            raise DpvipInputError(
                f"{self.paths[shard]}: sample {key} is not the one indexed (its SHA-256 differs): the data "
                "changed since it was indexed; index the shards again"
            )
        return sample

    def __getstate__(self):  # handles are per process; tables are cheap to rebuild
        keep = ("paths", "counts", "members", "starts", "fingerprint")
        return {name: self.__dict__[name] for name in keep}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._tables, self._hashes, self._handles, self._pid = {}, {}, {}, os.getpid()
