"""What the two dense fine-tunings (COCO detection, ADE20K segmentation) share so that a run
resumes bit for bit and gives the same result on any number of processes.

- Every step's global batch is a function of (seed, step): the data order is an endless
  stream of epochs, each a shuffle of (seed, epoch) (`epoch_order`), so a resumed run
  sees the batches an uninterrupted one would, without a sampler state to restore.
- The global batch is cut into micro-batches of `micro_batch` images (one forward and
  backward each), handed round-robin to the processes (`rank_micro_batches`). Before each
  micro-batch the torch generator is seeded from (seed, step, micro-batch number), so drop
  path, dropout and Mask R-CNN's anchor and RoI sampling draw the same numbers whichever
  process runs it. Only the order in which gradients are summed differs between process
  counts (float rounding).
- A process with fewer micro-batches than another in a step runs zero-weighted stand-ins,
  so every process makes the same number of forward and backward passes and DDP's
  collectives stay paired.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from dpvip.seeds import derive
from dpvip.train.distributed import Distributed
from dpvip.train.resume import LoopState

# The purposes a seed is derived for, as the first key after the run's seed.
ORDER, AUGMENTATION, MODEL = 0, 1, 2


def world_of(dist: Distributed | None) -> int:
    return 1 if dist is None else dist.world


def is_main(dist: Distributed | None) -> bool:
    return dist is None or dist.is_main


@functools.lru_cache(maxsize=4)
def epoch_order(count: int, seed: int, epoch: int) -> tuple[int, ...]:
    """The shuffle of `count` examples in `epoch` (a pure function of seed and epoch)."""
    generator = torch.Generator().manual_seed(derive(seed, ORDER, epoch))
    return tuple(torch.randperm(count, generator=generator).tolist())


def augmentation_generator(seed: int, step: int) -> torch.Generator:
    """The generator of step `step`'s augmentation draws (one per image of the global batch)."""
    return torch.Generator().manual_seed(derive(seed, AUGMENTATION, step))


@dataclass(frozen=True)
class MicroBatch:
    number: int  # within the global batch: its randomness is seeded from (seed, step, number)
    positions: range  # positions in the global batch
    weight: float  # 1, or 0 for a stand-in that only keeps this process in step with the others


def rank_micro_batches(batch: int, micro_batch: int, dist: Distributed | None) -> list[MicroBatch]:
    """This process's micro-batches of a global batch of `batch` images: numbers rank,
    rank + world, ...; padded with stand-ins (micro-batch 0 at weight 0) so that every
    process has ceil(micro-batches / world) of them."""
    world, rank = world_of(dist), 0 if dist is None else dist.rank
    count = math.ceil(batch / micro_batch)
    rounds = math.ceil(count / world)
    chosen = []
    for number in range(rank, rounds * world, world):
        own = number < count
        first = number * micro_batch if own else 0
        chosen.append(MicroBatch(number, range(first, min(first + micro_batch, batch)), 1.0 if own else 0.0))
    return chosen


def accumulate_gradients(
    network: nn.Module,
    micro_batches: list[MicroBatch],
    loss_of: Callable[[MicroBatch], torch.Tensor],
    seed_of: Callable[[int], int],
    dist: Distributed | None,
) -> float:
    """Forward and backward of this process's micro-batches; `loss_of` gives a micro-batch's
    share of the global batch's loss (its sum over processes and micro-batches is the
    loss). DDP averages gradients over processes, so each loss is scaled by the world
    size; gradients are exchanged after the last micro-batch only. Returns this process's
    share of the loss."""
    world = world_of(dist)
    share = 0.0
    for position, micro in enumerate(micro_batches):
        last = position == len(micro_batches) - 1
        sync = contextlib.nullcontext() if last or world == 1 else network.no_sync()
        torch.manual_seed(seed_of(micro.number))
        with sync:
            loss = loss_of(micro)
            (loss * (world * micro.weight)).backward()
        share += loss.item() * micro.weight
    return share


def check_no_batch_norm(model: nn.Module, name: str) -> None:
    """Refuse batch statistics: they would depend on how the batch is cut into micro-batches
    (the networks here use LayerNorm and GroupNorm)."""
    for module_name, module in model.named_modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            raise ValueError(f"{name} layer {module_name} is a BatchNorm: results would depend on the micro-batches")


def data_parallel(model: nn.Module, dist: Distributed | None) -> nn.Module:
    """`model` under DDP when there are several processes, else `model` itself. Buffers are
    not broadcast at each forward (the networks' buffers are fixed positions), which also
    keeps the collectives of processes with different micro-batch counts paired."""
    if world_of(dist) == 1:
        return model
    device_ids = [dist.device.index] if dist.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids, forward_sync_buffers=False)


def weights_digest(module: nn.Module) -> str:
    """SHA-256 of a network's state (names and bytes): a resumed run must start from the
    weights the saved one started from."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def tensors_digest(*tensors: torch.Tensor) -> str:
    """SHA-256 of in-memory data (shapes, dtypes and bytes)."""
    digest = hashlib.sha256()
    for tensor in tensors:
        digest.update(f"{tuple(tensor.shape)} {tensor.dtype}".encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def loop_state(
    work_dir: str | Path | None, name: str, fingerprint: dict, every: int, dist: Distributed | None
) -> LoopState:
    """The loop's state file `<work_dir>/<name>.pt`; without a work folder nothing is saved."""
    return LoopState(Path(work_dir) / f"{name}.pt" if work_dir is not None else None, fingerprint, every, dist)


def forget_state(work_dir: str | Path | None, name: str, dist: Distributed | None) -> None:
    """Delete the loop's state once the job's result exists (a rerun then starts over)."""
    loop_state(work_dir, name, {}, 1, dist).clear()


def rank_share(items: Sequence, dist: Distributed | None) -> Sequence:
    """This process's items, handed round-robin: rank, rank + world, ..."""
    return items if dist is None else items[dist.rank :: dist.world]


def gather_to_main(part: dict, dist: Distributed | None) -> dict | None:
    """The processes' dicts merged on rank 0 (None elsewhere)."""
    if world_of(dist) == 1:
        return part
    parts = [None] * dist.world if dist.is_main else None
    torch.distributed.gather_object(part, parts, dst=0)
    return {key: value for each in parts for key, value in each.items()} if dist.is_main else None


def broadcast_from_main(value, dist: Distributed | None):
    """Rank 0's `value` on every process."""
    if world_of(dist) == 1:
        return value
    carrier = [value]
    torch.distributed.broadcast_object_list(carrier, src=0)
    return carrier[0]
