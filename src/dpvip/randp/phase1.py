"""DP-RandP Phase I: non-private contrastive pre-training of a GroupNorm wide ResNet on
synthetic images (alignment and uniformity, or MoCo for Table 11).

SGD (momentum, weight decay on every trained weight) at lr = lr per 256 x batch / 256,
x0.1 at each milestone epoch. One process: the uniformity term compares every pair of the
batch, which DDP's per-rank losses would not.

The run lives in a folder as an MAE run does (`dpvip.train.run`): a state every
`checkpoint_every` steps, at the end and on SIGTERM; metrics; a rerun resumes. Views come
from a seed of (run seed, epoch, index) and batches from (run seed, step), so a resumed run
is bit-for-bit the uninterrupted one (CPU). model.pt holds the backbone (with its unused
classifier), the projection head, the size and the record; `load_backbone` starts Phase II.
"""

from __future__ import annotations

import bisect
from pathlib import Path

import torch
from torch.utils.data import Dataset

from dpvip.data.sampling import EpochBatches
from dpvip.errors import DpvipInputError
from dpvip.randp.backbone import FORMAT, load_backbone
from dpvip.randp.phase1_methods import build_method
from dpvip.plan.dprandp_phase1 import Phase1Settings
from dpvip.randp.phase1_views import view_pairs
from dpvip.train import checkpoint
from dpvip.train.run import MAERun

__all__ = ["FORMAT", "EpochMilestones", "Phase1Settings", "Phase1Training", "load_backbone", "train_phase1"]


class EpochMilestones:
    """lr = base x gamma^(milestones passed), step-wise: step s is in epoch s // steps_per_epoch
    (torch's MultiStepLR stepped once per epoch, as the authors' code does). It depends on
    the step alone: call `step_update(step)` before each update."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        base_lr: float,
        steps_per_epoch: int,
        milestones: tuple[int, ...],
        gamma: float = 0.1,
    ):
        self.optimizer, self.base_lr, self.steps_per_epoch = optimizer, base_lr, steps_per_epoch
        self.milestones, self.gamma = tuple(sorted(milestones)), gamma

    def lr_at(self, step: int) -> float:
        return self.base_lr * self.gamma ** bisect.bisect_right(self.milestones, step // self.steps_per_epoch)

    def step_update(self, step: int) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr_at(step)

    def state_dict(self) -> dict:
        return {}  # nothing to keep: the step decides

    def load_state_dict(self, state: dict) -> None:
        pass


class Phase1Training(MAERun):
    stage = "dprandp_phase1"
    description = "DP-RandP Phase I"
    fixed = ()

    def __init__(self, settings: Phase1Settings, data_index: str | Path, run_dir: str | Path, progress: bool = True):
        settings.check()
        super().__init__(settings, data_index, run_dir, progress)
        if self.dist.world > 1:
            self.dist.close()
            raise DpvipInputError(
                f"DP-RandP Phase I runs in one process, not {self.dist.world} "
                "(its loss compares every pair of the batch)"
            )
        torch.manual_seed(settings.seed)
        self.model = build_method(settings).to(self.dist.device)
        self.steps_per_epoch = len(self.reader) // settings.batch_size
        self.sampler = EpochBatches(len(self.reader), settings.batch_size, 0, settings.seed)
        self.total_steps = settings.epochs * self.steps_per_epoch
        trained = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.SGD(
            trained, lr=settings.base_lr, momentum=settings.momentum, weight_decay=settings.weight_decay
        )
        self.scheduler = EpochMilestones(self.optimizer, settings.base_lr, self.steps_per_epoch, settings.lr_milestones)
        self.final_loss: float | None = None

    # --- data ----------------------------------------------------------------------------
    def dataset(self) -> Dataset:
        return view_pairs(self.reader, self.settings.image_size)

    def empty_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        size = self.settings.image_size
        return torch.zeros(0, 2, 3, size, size), torch.zeros(0, 0)

    # --- training ------------------------------------------------------------------------
    def train_step(self, pairs: torch.Tensor, noise: torch.Tensor, unreadable: int = 0) -> tuple[float, int]:
        """One update from a batch of view pairs (batch, 2, 3, size, size); `noise` (MAE's
        mask draws) is empty. Returns (loss x batch, batch)."""
        count = pairs.shape[0]
        self.optimizer.zero_grad(set_to_none=True)
        if count < self.model.minimum_batch:
            return 0.0, 0  # corrupt samples left nothing to contrast: no update
        pairs = pairs.to(self.dist.device, non_blocking=True)
        loss = self.model.loss(pairs[:, 0], pairs[:, 1])
        loss.backward()
        self.optimizer.step()
        self.final_loss = loss.item()
        return self.final_loss * count, count

    # --- state and records ---------------------------------------------------------------
    def extra_state(self) -> dict:
        # Batches are a function of (seed, step), so the step is all a resumed run needs;
        # epoch and batch are recorded for people.
        position = {"epoch": self.step // self.steps_per_epoch, "batch": self.step % self.steps_per_epoch}
        return {"data_position": position, "final_loss": self.final_loss}

    def load_extra_state(self, state: dict) -> None:
        self.final_loss = state.get("final_loss")

    def log_fields(self) -> dict:
        return {"epoch": self.step / self.steps_per_epoch}

    def final_record(self) -> dict:
        s = self.settings
        return {"method": s.method, "model": s.model, "epochs": s.epochs, "final_loss": self.final_loss}

    def save_model(self, record: dict) -> None:
        encoder = self.model.encoder
        payload = {
            "format": FORMAT,
            "size": self.settings.model,
            "model": encoder.backbone.state_dict(),
            "head": encoder.head.state_dict(),
            "record": record,
        }
        checkpoint.save_atomic(payload, self.run_dir / "model.pt")


def train_phase1(settings: Phase1Settings, data_index: str | Path, run_dir: str | Path, progress: bool = True) -> dict:
    """Train (or resume) the Phase I run in `run_dir`; returns the record stored with model.pt."""
    return Phase1Training(settings, data_index, run_dir, progress).run()
