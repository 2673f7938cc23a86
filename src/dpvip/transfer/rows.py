"""Feature rows read a micro-batch at a time, widened to float32 per batch: how every DP
transfer consumer (Mehta et al.'s heads, DP-RandP's private probe, the probe's centring
statistics, the evaluations) sees its features, so that none of them holds a whole cache.

A cache's shards are .npy files, read through numpy memory maps (`np.load(mmap_mode="r")`).
The pages of a memory map count in the process's resident set until the map is closed, so a
read maps a shard for at most `READ_BYTES` of its rows and closes it again: what a read leaves
resident is its float32 result, not the file it went through (whose pages stay in the
kernel's page cache, reclaimable and outside the process). In-memory tensors (tests, small
feature sets) are read through the same interface (`TensorRows`).

Every read returns a fresh tensor the caller owns, so a consumer may prepare it in place
(DP-RandP's normalisation and centring) without a second copy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch

from dpvip.train.resume import StepInterrupted

READ_BYTES = 64 << 20  # of a shard mapped at once (float16 rows of 36,864 dims: 910 rows)

Prepare = Callable[[torch.Tensor], torch.Tensor]  # a float32 batch on the device -> the model's input


class Rows(ABC):
    """(n, width) feature rows, read on demand as float32 tensors."""

    device = torch.device("cpu")

    def __init__(self, n: int, width: int):
        self.shape = (int(n), int(width))

    def __len__(self) -> int:
        return self.shape[0]

    @abstractmethod
    def read(self, start: int, stop: int, widen: bool = True) -> torch.Tensor:
        """Rows start..stop - 1, in float32 (`widen`) or as stored."""

    @abstractmethod
    def take(self, indices: np.ndarray, widen: bool = True) -> torch.Tensor:
        """The rows at `indices`, in their order."""


class TensorRows(Rows):
    """Rows of a (n, width) tensor, on its device."""

    def __init__(self, tensor: torch.Tensor):
        super().__init__(*tensor.shape)
        self.tensor, self.device = tensor, tensor.device

    def read(self, start: int, stop: int, widen: bool = True) -> torch.Tensor:
        return self.tensor[start:stop].to(torch.float32 if widen else self.tensor.dtype, copy=True)

    def take(self, indices: np.ndarray, widen: bool = True) -> torch.Tensor:
        rows = self.tensor[torch.from_numpy(indices).to(self.device)]  # indexing copies
        return rows.to(torch.float32) if widen else rows


class ShardedRows(Rows):
    """Rows stored in .npy shards, shard k holding rows bounds[k] .. bounds[k + 1] - 1."""

    def __init__(self, paths: Sequence[str | Path], bounds: Sequence[int], width: int, dtype: str):
        super().__init__(bounds[-1], width)
        self.paths, self.bounds = [Path(p) for p in paths], np.asarray(bounds, dtype=np.int64)
        self.dtype = np.dtype(dtype)
        self.block = max(1, READ_BYTES // (width * self.dtype.itemsize))  # rows mapped at once

    def _shards(self, start: int, stop: int) -> Iterator[tuple[Path, int, int, int]]:
        """(path, first row of the shard, start, stop) of every shard meeting start..stop - 1."""
        first = max(0, int(np.searchsorted(self.bounds, start, side="right")) - 1)
        for k in range(first, len(self.paths)):
            low, high = int(self.bounds[k]), int(self.bounds[k + 1])
            if low >= stop:
                break
            yield self.paths[k], low, max(start, low), min(stop, high)

    def read(self, start: int, stop: int, widen: bool = True) -> torch.Tensor:
        start, stop = max(0, start), min(len(self), stop)
        out = np.empty((max(0, stop - start), self.shape[1]), np.float32 if widen else self.dtype)
        for path, offset, low, high in self._shards(start, stop):
            for block in range(low, high, self.block):
                end = min(high, block + self.block)
                rows = np.load(path, mmap_mode="r")  # mapped for this block only (see the module's note)
                out[block - start : end - start] = rows[block - offset : end - offset]  # widened as it is copied
                del rows
        return torch.from_numpy(out)

    def take(self, indices: np.ndarray, widen: bool = True) -> torch.Tensor:
        indices = np.asarray(indices, dtype=np.int64)
        out = np.empty((len(indices), self.shape[1]), np.float32 if widen else self.dtype)
        for k, path in enumerate(self.paths):
            positions = np.flatnonzero((indices >= self.bounds[k]) & (indices < self.bounds[k + 1]))
            for block in range(0, len(positions), self.block):
                chosen = positions[block : block + self.block]
                rows = np.load(path, mmap_mode="r")
                out[chosen] = rows[indices[chosen] - self.bounds[k]]
                del rows
        return torch.from_numpy(out)


class SubsetRows(Rows):
    """The rows of `rows` at `indices` (sorted positions), in that order: the part of a cache
    a head trains on, or the part held out to choose its learning rate (`dpvip.selection`),
    read through the cache as any rows are, never copied whole."""

    def __init__(self, rows: Rows, indices: np.ndarray):
        self.rows, self.indices = rows, np.asarray(indices, dtype=np.int64)
        super().__init__(len(self.indices), rows.shape[1])
        self.device = rows.device

    def read(self, start: int, stop: int, widen: bool = True) -> torch.Tensor:
        return self.rows.take(self.indices[max(0, start) : max(0, min(len(self), stop))], widen)

    def take(self, indices: np.ndarray, widen: bool = True) -> torch.Tensor:
        return self.rows.take(self.indices[np.asarray(indices, dtype=np.int64)], widen)


def as_rows(features: Rows | torch.Tensor) -> Rows:
    return features if isinstance(features, Rows) else TensorRows(features)


def as_views(train: Rows | torch.Tensor | Sequence[Rows]) -> list[Rows]:
    """The train views as rows: a (views, n, d) or (n, d) tensor, rows, or a list of rows."""
    if isinstance(train, torch.Tensor):
        return [TensorRows(view) for view in (train if train.ndim == 3 else train[None])]
    return [train] if isinstance(train, Rows) else list(train)


@dataclass
class FeatureStream:
    """Micro-batches of (features, labels) on `device`: `readers` yields functions that read
    their batch only when called, so the batch before is freed first and one micro-batch is
    resident at a time. `prepare` maps each float32 batch (in place, on the device);
    `stop` is asked before each micro-batch, and when it answers True the step is abandoned
    (`dpvip.train.resume.StepInterrupted`)."""

    rows: Rows
    labels: torch.Tensor
    micro_batch: int
    device: torch.device
    prepare: Prepare | None = None
    stop: Callable[[], bool] | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def readers(self, chosen: np.ndarray | None = None) -> Iterator[Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
        """Readers of the chosen rows (all rows if None), micro_batch at a time."""
        count = len(self.rows) if chosen is None else len(chosen)
        for start in range(0, count, self.micro_batch):
            if self.stop is not None and self.stop():
                raise StepInterrupted
            yield partial(self._read, chosen, start, min(count, start + self.micro_batch))

    def _read(self, chosen: np.ndarray | None, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        # On a GPU the rows travel as stored (float16: half the bytes) and are widened there.
        widen = self.device.type == "cpu"
        if chosen is None:
            x, y = self.rows.read(start, stop, widen), self.labels[start:stop]
        else:
            index = chosen[start:stop]
            x, y = self.rows.take(index, widen), self.labels[torch.from_numpy(index).to(self.labels.device)]
        x, y = x.to(self.device).to(torch.float32), y.to(self.device, torch.long)
        return (self.prepare(x) if self.prepare is not None else x), y
