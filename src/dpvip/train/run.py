"""The life of an MAE training run in a folder, shared by non-private and DP pre-training.

`work/state.pt` holds the model, optimizer, scheduler, RNG states, step, loss window and
the run's fingerprint (settings and data): a `dpvip.train.resume.LoopState`, written
atomically every `checkpoint_every` steps, at the end and on SIGTERM (ranks agree on the
stop step first, then the job stops). `work/metrics.jsonl` gets a record every `log_every`
steps. At the end `model.pt` (weights, settings and what trained them) and `metrics.jsonl`
are written beside `work/`. A rerun resumes from the state and refuses one written with
other settings or data (a DP run's ledger of another mechanism first, by name).
"""

from __future__ import annotations

import abc
import shutil
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

from dpvip.data.images import AugmentedImages, collate_skipping_corrupt, mae_augmentation
from dpvip.data.shard_reader import ShardReader
from dpvip.models.checkpoint import save_mae
from dpvip.models import count_parameters
from dpvip.train.distributed import Distributed
from dpvip.train.metrics import MetricsLog
from dpvip.train.resume import LoopState


class MAERun(abc.ABC):
    """Subclasses set `self.model`, `self.optimizer`, `self.scheduler`, `self.sampler` and
    `self.total_steps` in `__init__`, and implement `train_step`. Runs of other networks
    (DP-RandP Phase I) override `dataset`, `empty_batch`, `save_model` and `fixed`."""

    stage = "mae"
    description = "MAE training"
    # Recorded with model.pt: weights that training leaves as they are.
    fixed: tuple[str, ...] = ("pos_embed", "decoder_pos_embed")

    def __init__(self, settings, data_index: str | Path, run_dir: str | Path, progress: bool = True):
        self.settings, self.run_dir, self.progress = settings, Path(run_dir), progress
        self.data_index = Path(data_index)
        self.dist = Distributed.from_environment()
        self.reader = ShardReader.from_index(self.data_index)
        self.state_path = self.run_dir / "work" / "state.pt"
        self.step, self.skipped, self.images_seen = 0, 0, 0
        # Loss summed since the last metrics record: kept in the state, so a resumed run logs
        # the same averages as an uninterrupted one.
        self.window = {"loss": 0.0, "count": 0}

    # --- what subclasses add --------------------------------------------------------------
    @abc.abstractmethod
    def train_step(self, images: torch.Tensor, noise: torch.Tensor, unreadable: int = 0) -> tuple[float, int]:
        """One update from this rank's examples (`unreadable`: those of its batch that were
        skipped as corrupt); returns (loss summed over the global batch, its size)."""

    def extra_state(self) -> dict:
        return {}

    def load_extra_state(self, state: dict) -> None:
        pass

    def log_fields(self) -> dict:
        return {}

    def final_record(self) -> dict:
        return {}

    def dataset(self) -> Dataset:
        """dataset[(index, seed)] -> (images, noise), or a CorruptSample."""
        s = self.settings
        return AugmentedImages(self.reader, mae_augmentation(s.model.image_size, s.crop_scale), self.model.num_patches)

    def save_model(self, record: dict) -> None:
        save_mae(self.model, self.run_dir / "model.pt", record)

    # --- state ---------------------------------------------------------------------------
    def fingerprint(self) -> dict:
        """The settings and the training data (shard contents, when the index records them)."""
        return self.settings.fingerprint() | {"data": self.reader.fingerprint}

    def loop_state(self) -> LoopState:
        """The run's state file, saved every `checkpoint_every` steps (rank 0 writes)."""
        return LoopState(
            self.state_path, self.fingerprint(), self.settings.checkpoint_every, self.dist, self.total_steps
        )

    def resume(self, saved: LoopState) -> None:
        # The extra state is loaded first: it may refuse the state with a sharper reason
        # (a DP run's ledger names another mechanism) than the fingerprint would.
        state = saved.restore(self.dist.device, check=self.load_extra_state)
        if state is None:
            return
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step, self.skipped, self.images_seen = state["step"], state["skipped"], state["images_seen"]
        self.window = dict(state["window"])

    def snapshot(self) -> dict:
        """What the state holds beside the step, fingerprint and RNG states."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "skipped": self.skipped,
            "images_seen": self.images_seen,
            "window": self.window,
        } | self.extra_state()

    # --- training ------------------------------------------------------------------------
    def loader(self) -> DataLoader:
        self.sampler.start_step, self.sampler.total_steps = self.step, self.total_steps
        return DataLoader(
            self.dataset(),
            batch_sampler=self.sampler,
            num_workers=self.settings.workers,
            collate_fn=collate_skipping_corrupt,
            pin_memory=self.dist.device.type == "cuda",
        )

    def empty_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A batch of no images, shaped like real ones."""
        size = self.model.settings.image_size
        return torch.zeros(0, self.model.in_chans, size, size), torch.zeros(0, self.model.num_patches)

    def run(self) -> dict:
        with self.loop_state() as saved:
            self.resume(saved)
            self._train(saved)
            saved.save(self.step, self.snapshot)  # also when nothing was left to do, so the state is always final
        return self.finish()

    def _train(self, saved: LoopState) -> None:
        """The steps left, saved by `saved` (every k steps; on SIGTERM, then the job stops)."""
        metrics = MetricsLog(self.run_dir / "work" / "metrics.jsonl", self.step) if self.dist.is_main else None
        bar = tqdm(
            total=self.total_steps,
            initial=self.step,
            desc=self.description,
            unit="step",
            disable=not (self.progress and self.dist.is_main),
            mininterval=5,
        )
        window_start = time.perf_counter()
        self.model.train()
        with bar:
            for images, noise, corrupt in self.loader():
                if images.numel() == 0:
                    images, noise = self.empty_batch()
                self.scheduler.step_update(self.step)
                loss_sum, count = self.train_step(images, noise, len(corrupt))
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
                saved.after_step(self.step, self.snapshot, last)  # the last step's state: saved by `run`

    def log_record(self, elapsed: float) -> dict:
        return {
            "step": self.step,
            "loss": self.window["loss"] / max(1, self.window["count"]),
            "lr": self.optimizer.param_groups[0]["lr"],
            "images_per_second": self.window["count"] / max(elapsed, 1e-9),
            "skipped": self.skipped,
        } | self.log_fields()

    def finish(self) -> dict:
        record = {
            "stage": self.stage,
            "data": str(self.data_index),
            "samples": len(self.reader),
            "steps": self.step,
            "images_seen": self.images_seen,
            "skipped_samples": self.skipped,
            "trainable_parameters": count_parameters(self.model),
            "fixed": list(self.fixed),
            "settings": self.settings.fingerprint(),
            "world_size": self.dist.world,
        } | self.final_record()
        if self.dist.is_main:
            self.save_model(record)
            shutil.copyfile(self.run_dir / "work" / "metrics.jsonl", self.run_dir / "metrics.jsonl")
        self.dist.barrier()
        self.dist.close()
        return record
