"""One process per device under torchrun, or a single process; the same code either way."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Distributed:
    rank: int
    world: int
    local_rank: int
    device: torch.device

    @classmethod
    def from_environment(cls) -> Distributed:
        """Join the process group torchrun describes (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_*);
        without torchrun: rank 0 of 1. GPUs use NCCL, CPUs gloo."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if torch.cuda.is_available():
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
        else:
            device = torch.device("cpu")
        if world > 1 and not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=world)
        return cls(rank, world, local_rank, device)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def sum(self, value: float) -> float:
        """`value` summed over ranks (the value itself on one process)."""
        if self.world == 1:
            return float(value)
        tensor = torch.tensor([float(value)], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return float(tensor.item())

    def sum_tensor(self, tensor: torch.Tensor) -> None:
        """Sum `tensor` over ranks, in place."""
        if self.world > 1:
            dist.all_reduce(tensor)

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def close(self) -> None:
        if self.world > 1 and dist.is_initialized():
            dist.destroy_process_group()
