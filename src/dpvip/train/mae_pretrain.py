"""Non-private MAE pre-training on webdataset shards ((Syn)-ViP, ViP step 1).

He et al.'s recipe: AdamW (betas 0.9/0.95, decay on weights only), lr = blr * batch / 256,
linear warm-up then cosine, RandomResizedCrop(scale 0.2-1) and flip, mask ratio 0.75,
norm-pixel loss. One process or DDP under torchrun; the global batch is split evenly over
ranks and, within a rank, into micro-batches whose gradients are accumulated.

The run lives in a folder (see `dpvip.train.run`). Every sample's crop, flip and mask come
from a seed of (run seed, epoch, index) and the batches from (run seed, step), so a resumed
run is bit-for-bit the uninterrupted one (CPU).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel

from dpvip.data.sampling import EpochBatches
from dpvip.models.mae import MaskedAutoencoder
from dpvip.train.optim import adamw, warmup_cosine
from dpvip.train.run import MAERun
from dpvip.plan.pretrain import PretrainSettings


class MAEPretraining(MAERun):
    stage = "mae_pretrain"
    description = "MAE pre-training"

    def __init__(self, settings: PretrainSettings, data_index: str | Path, run_dir: str | Path, progress: bool = True):
        super().__init__(settings, data_index, run_dir, progress)
        torch.manual_seed(settings.seed)
        self.model = MaskedAutoencoder(settings.model).to(self.dist.device)
        self.steps_per_epoch = len(self.reader) // settings.batch_size
        settings.check_split(self.dist.world)
        self.sampler = EpochBatches(
            len(self.reader), settings.batch_size, 0, settings.seed, self.dist.rank, self.dist.world
        )
        self.total_steps = settings.epochs * self.steps_per_epoch
        self.optimizer = adamw(self.model, settings.lr, settings.weight_decay, settings.betas)
        warmup = round(settings.warmup_epochs * self.steps_per_epoch)
        self.scheduler = warmup_cosine(self.optimizer, self.total_steps, min(warmup, self.total_steps), settings.min_lr)
        self.network = self.model
        if self.dist.world > 1:
            device_ids = [self.dist.device.index] if self.dist.device.type == "cuda" else None
            self.network = DistributedDataParallel(self.model, device_ids=device_ids)

    def extra_state(self) -> dict:
        # Batches are a function of (seed, step), so the step is all a resumed run needs;
        # epoch and batch are recorded for people.
        return {
            "data_position": {"epoch": self.step // self.steps_per_epoch, "batch": self.step % self.steps_per_epoch}
        }

    def log_fields(self) -> dict:
        return {"epoch": self.step / self.steps_per_epoch}

    def final_record(self) -> dict:
        return {"epochs": self.settings.epochs}

    def train_step(self, images: torch.Tensor, noise: torch.Tensor, unreadable: int = 0) -> tuple[float, int]:
        """One update on this rank's share; returns (summed loss over the global batch, its size)."""
        global_count = self.dist.sum(images.shape[0])
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), device=self.dist.device)
        if global_count == 0:
            return 0.0, 0
        # DDP averages over ranks, so each rank scales by world / global count: the update
        # follows the mean loss over the global batch.
        weight = self.dist.world / global_count
        if images.shape[0] == 0:
            # Every sample of this rank's share was corrupt, but DDP needs this rank's
            # backward pass too: a zero-weighted stand-in contributes nothing to the sum.
            settings = self.model.settings
            images = torch.zeros(1, self.model.in_chans, settings.image_size, settings.image_size)
            noise, weight = torch.zeros(1, self.model.num_patches), 0.0
        micro = self.settings.micro_batch or images.shape[0]
        chunks = list(zip(images.split(micro), noise.split(micro)))
        autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.dist.device.type == "cuda")
        for position, (x, n) in enumerate(chunks):
            last = position == len(chunks) - 1
            sync = contextlib.nullcontext() if last or self.dist.world == 1 else self.network.no_sync()
            with sync, autocast:
                losses = self.network(
                    x.to(self.dist.device, non_blocking=True), n.to(self.dist.device, non_blocking=True)
                ).loss
                (losses.float().sum() * weight).backward()
            loss_sum += losses.detach().float().sum() * (weight > 0)
        self.optimizer.step()
        return self.dist.sum(loss_sum.item()), int(global_count)


def pretrain_mae(
    settings: PretrainSettings, data_index: str | Path, run_dir: str | Path, progress: bool = True
) -> dict:
    """Train (or resume) the run in `run_dir`; returns the record stored with model.pt."""
    return MAEPretraining(settings, data_index, run_dir, progress).run()
