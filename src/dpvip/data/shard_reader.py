"""Random access by global index into webdataset tar shards.

A webdataset shard is a plain tar whose members `<key>.<ext>` group into samples. Samples
are numbered across shards in order (shard by shard, keys sorted), so a sample's global
index is stable. Member offsets come from the tar headers, read once per shard on first use;
each process opens its own file handles (DataLoader workers fork), and reads use pread.
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


def _member_table(path: Path) -> list[tuple[str, dict[str, tuple[int, int]]]]:
    """[(key, {extension: (offset, size)})] in key order."""
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


class ShardReader:
    """Samples of `shards` [(path, sample count)] by global index, as {extension: bytes}."""

    def __init__(self, shards: list[tuple[str | Path, int]]):
        self.paths = [Path(path) for path, _ in shards]
        self.counts = [int(count) for _, count in shards]
        missing = [str(path) for path in self.paths if not path.is_file()]
        if missing:
            raise DpvipInputError(f"shard {missing[0]} is missing ({len(missing)} of {len(self.paths)} shards missing)")
        self.starts = [0]
        for count in self.counts:
            self.starts.append(self.starts[-1] + count)
        self.fingerprint: str | None = None  # what the shards hold, when an index names it
        self._tables: dict[int, list] = {}
        self._handles: dict[int, int] = {}
        self._pid = os.getpid()

    @classmethod
    def from_index(cls, index_path: str | Path) -> ShardReader:
        """From a dataset's index.json (`shards`: [{file, samples}], files beside it)."""
        index_path = Path(index_path)
        if not index_path.is_file():
            raise DpvipInputError(f"dataset index {index_path} does not exist")
        try:
            index = json.loads(index_path.read_text())
            shards = index["shards"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise DpvipInputError(f"dataset index {index_path} is not a shard index: {first_line(err)}") from None
        reader = cls([(index_path.parent / shard["file"], shard["samples"]) for shard in shards])
        reader.fingerprint = hashlib.sha256(json.dumps(shards, sort_keys=True).encode()).hexdigest()
        return reader

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
            table = _member_table(self.paths[shard])
            if len(table) != self.counts[shard]:
                raise DpvipInputError(f"shard {self.paths[shard]} holds {len(table)} samples; its index says {self.counts[shard]}")
            self._tables[shard] = table
        key, members = self._tables[shard][position]
        handle = self._handle(shard)
        sample = {"__key__": key}
        for extension, (offset, size) in members.items():
            data = os.pread(handle, size, offset)
            if len(data) != size:
                raise CorruptSample(f"{self.paths[shard]}: member {key}.{extension} is truncated")
            sample[extension] = data
        return sample

    def __getstate__(self):  # handles are per process; tables are cheap to rebuild
        return {"paths": self.paths, "counts": self.counts, "starts": self.starts, "fingerprint": self.fingerprint}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._tables, self._handles, self._pid = {}, {}, os.getpid()
