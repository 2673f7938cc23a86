"""Non-private MAE pre-training on webdataset shards ((Syn)-ViP, ViP step 1).

He et al.'s recipe: AdamW (betas 0.9/0.95, decay on weights only), lr = blr * batch / 256,
linear warm-up then cosine, RandomResizedCrop(scale 0.2-1) and flip, mask ratio 0.75,
norm-pixel loss. One process or DDP under torchrun; the global batch is split evenly over
ranks and, within a rank, into micro-batches whose gradients are accumulated.

The run lives in a folder: `work/state.pt` (model, optimizer, step, RNG states, written
atomically every `checkpoint_every` steps, at the end, and on SIGTERM) and
`work/metrics.jsonl`; at the end `model.pt` and `metrics.jsonl` are written beside them.
Every sample's crop, flip and mask come from a seed of (run seed, epoch, index) and the
batches from (run seed, step), so a resumed run is bit-for-bit the uninterrupted one (CPU).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import time
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from tqdm import tqdm

from dpvip.data.images import AugmentedImages, collate_skipping_corrupt, mae_augmentation
from dpvip.data.sampling import EpochBatches
from dpvip.data.shard_reader import ShardReader
from dpvip.errors import DpvipInputError
from dpvip.models.checkpoint import save_mae
from dpvip.models.mae import MaskedAutoencoder, count_parameters
from dpvip.train import checkpoint
from dpvip.train.distributed import Distributed
from dpvip.train.metrics import MetricsLog
from dpvip.train.optim import adamw, warmup_cosine
from dpvip.train.settings import PretrainSettings, first_difference


class _StopRequest:
    """Turns SIGTERM (Slurm time limit, preemption) into a checkpoint and a clean stop."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        with contextlib.suppress(ValueError):  # not the main thread: no handler
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum, frame):
        self.requested = True

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


class MAEPretraining:
    def __init__(self, settings: PretrainSettings, data_index: str | Path, run_dir: str | Path, progress: bool = True):
        self.settings, self.run_dir, self.progress = settings, Path(run_dir), progress
        self.data_index = Path(data_index)
        self.dist = Distributed.from_environment()
        self.reader = ShardReader.from_index(self.data_index)
        self.state_path = self.run_dir / "work" / "state.pt"
        torch.manual_seed(settings.seed)
        self.model = MaskedAutoencoder(settings.model).to(self.dist.device)
        self.steps_per_epoch = len(self.reader) // settings.batch_size
        settings.check_split(self.dist.world)
        self.sampler = EpochBatches(len(self.reader), settings.batch_size, 0, settings.seed, self.dist.rank, self.dist.world)
        self.total_steps = settings.epochs * self.steps_per_epoch
        self.optimizer = adamw(self.model, settings.lr, settings.weight_decay, settings.betas)
        warmup = round(settings.warmup_epochs * self.steps_per_epoch)
        self.scheduler = warmup_cosine(self.optimizer, self.total_steps, min(warmup, self.total_steps), settings.min_lr)
        self.step, self.skipped, self.images_seen = 0, 0, 0
        # Loss summed since the last metrics record: kept in the state, so a resumed run logs
        # the same averages as an uninterrupted one.
        self.window = {"loss": 0.0, "count": 0}

    # --- state ---------------------------------------------------------------------------
    def fingerprint(self) -> dict:
        """The settings and the training data (shard contents, when the index records them)."""
        return self.settings.fingerprint() | {"data": self.reader.fingerprint}

    def resume(self) -> None:
        if not self.state_path.is_file():
            return
        state = checkpoint.load(self.state_path, self.dist.device)
        difference = first_difference(state["fingerprint"], self.fingerprint())
        if difference:
            raise DpvipInputError(f"{self.state_path} belongs to a run with {difference}; delete {self.state_path.parent} to start over")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        checkpoint.restore_rng_states(state["rng"])
        self.step, self.skipped, self.images_seen = state["step"], state["skipped"], state["images_seen"]
        self.window = dict(state["window"])
        if self.dist.is_main:
            print(f"resuming {self.run_dir} at step {self.step} of {self.total_steps} from {self.state_path}", flush=True)

    def save_state(self) -> None:
        if self.dist.is_main:
            state = {
                "fingerprint": self.fingerprint(),
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                # The data position: batches are a function of (seed, step), so the step
                # is all a resumed run needs; epoch and batch are recorded for people.
                "data_position": {"epoch": self.step // self.steps_per_epoch, "batch": self.step % self.steps_per_epoch},
                "rng": checkpoint.rng_states(),
                "step": self.step,
                "skipped": self.skipped,
                "images_seen": self.images_seen,
                "window": self.window,
            }
            checkpoint.save_atomic(state, self.state_path)
        self.dist.barrier()

    # --- training ------------------------------------------------------------------------
    def loader(self) -> DataLoader:
        s = self.settings
        self.sampler.start_step, self.sampler.total_steps = self.step, self.total_steps
        dataset = AugmentedImages(self.reader, mae_augmentation(s.model.image_size, s.crop_scale), self.model.num_patches)
        return DataLoader(
            dataset,
            batch_sampler=self.sampler,
            num_workers=s.workers,
            collate_fn=collate_skipping_corrupt,
            pin_memory=self.dist.device.type == "cuda",
        )

    def train_step(self, network, images: torch.Tensor, noise: torch.Tensor) -> tuple[float, int]:
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
            sync = contextlib.nullcontext() if last or self.dist.world == 1 else network.no_sync()
            with sync, autocast:
                losses = network(x.to(self.dist.device, non_blocking=True), n.to(self.dist.device, non_blocking=True)).loss
                (losses.float().sum() * weight).backward()
            loss_sum += losses.detach().float().sum() * (weight > 0)
        self.optimizer.step()
        return self.dist.sum(loss_sum.item()), int(global_count)

    def run(self) -> dict:
        self.resume()
        network = self.model
        if self.dist.world > 1:
            network = DistributedDataParallel(self.model, device_ids=[self.dist.device.index] if self.dist.device.type == "cuda" else None)
        metrics = MetricsLog(self.run_dir / "work" / "metrics.jsonl", self.step) if self.dist.is_main else None
        bar = tqdm(total=self.total_steps, initial=self.step, desc="MAE pre-training", unit="step", disable=not (self.progress and self.dist.is_main), mininterval=5)
        window_start = time.perf_counter()
        network.train()
        with bar, _StopRequest() as stop:
            for images, noise, corrupt in self.loader():
                self.scheduler.step_update(self.step)
                loss_sum, count = self.train_step(network, images, noise)
                self.step += 1
                self.skipped += int(self.dist.sum(len(corrupt)))
                self.images_seen += count
                self.window = {"loss": self.window["loss"] + loss_sum, "count": self.window["count"] + count}
                bar.update()
                last = self.step == self.total_steps
                if self.step % self.settings.log_every == 0 or last:
                    record = self.log_record(time.perf_counter() - window_start)
                    if metrics:
                        metrics.write(record)
                    bar.set_postfix(loss=f"{record['loss']:.4f}", lr=f"{record['lr']:.2e}")
                    self.window, window_start = {"loss": 0.0, "count": 0}, time.perf_counter()
                # Ranks may see the signal at different steps; they agree to stop together.
                stopping = self.dist.sum(float(stop.requested)) > 0
                if self.step % self.settings.checkpoint_every == 0 or last or stopping:
                    self.save_state()
                if stopping:
                    raise SystemExit(f"stopped by SIGTERM at step {self.step} of {self.total_steps}; state saved in {self.state_path}")
        self.save_state()  # also when nothing was left to do, so the state is always final
        return self.finish()

    def log_record(self, elapsed: float) -> dict:
        return {
            "step": self.step,
            "epoch": self.step / self.steps_per_epoch,
            "loss": self.window["loss"] / max(1, self.window["count"]),
            "lr": self.optimizer.param_groups[0]["lr"],
            "images_per_second": self.window["count"] / max(elapsed, 1e-9),
            "skipped": self.skipped,
        }

    def finish(self) -> dict:
        record = {
            "stage": "mae_pretrain",
            "data": str(self.data_index),
            "samples": len(self.reader),
            "steps": self.step,
            "epochs": self.settings.epochs,
            "images_seen": self.images_seen,
            "skipped_samples": self.skipped,
            "trainable_parameters": count_parameters(self.model),
            "fixed": ["pos_embed", "decoder_pos_embed"],
            "settings": self.settings.fingerprint(),
            "world_size": self.dist.world,
        }
        if self.dist.is_main:
            save_mae(self.model, self.run_dir / "model.pt", record)
            shutil.copyfile(self.run_dir / "work" / "metrics.jsonl", self.run_dir / "metrics.jsonl")
        self.dist.barrier()
        self.dist.close()
        return record


def pretrain_mae(settings: PretrainSettings, data_index: str | Path, run_dir: str | Path, progress: bool = True) -> dict:
    """Train (or resume) the run in `run_dir`; returns the record stored with model.pt."""
    return MAEPretraining(settings, data_index, run_dir, progress).run()
