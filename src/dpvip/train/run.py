"""The life of an MAE training run in a folder, shared by non-private and DP pre-training.

`work/state.pt` holds the model, optimizer, scheduler, RNG states, step, loss window and
the run's fingerprint (settings and data); it is written atomically every
`checkpoint_every` steps, at the end and on SIGTERM (ranks agree on the stop step first).
`work/metrics.jsonl` gets a record every `log_every` steps. At the end `model.pt` (weights,
settings and what trained them) and `metrics.jsonl` are written beside `work/`. A rerun
resumes from the state and refuses one written with other settings or data.
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
from dpvip.errors import DpvipInputError
from dpvip.models.checkpoint import save_mae
from dpvip.models import count_parameters
from dpvip.train import checkpoint
from dpvip.train.distributed import Distributed
from dpvip.train.metrics import MetricsLog
from dpvip.plan.pretrain import first_difference
from dpvip.train.stop import StopRequest


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
    def train_step(self, images: torch.Tensor, noise: torch.Tensor) -> tuple[float, int]:
        """One update from this rank's examples; returns (loss summed over the global batch, its size)."""

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

    def resume(self) -> None:
        if not self.state_path.is_file():
            return
        state = checkpoint.load(self.state_path, self.dist.device)
        self.load_extra_state(state)  # first: it may refuse the state with a sharper reason
        difference = first_difference(state["fingerprint"], self.fingerprint())
        if difference:
            raise DpvipInputError(
                f"{self.state_path} belongs to a run with {difference}; delete {self.state_path.parent} to start over"
            )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        checkpoint.restore_rng_states(state["rng"])
        self.step, self.skipped, self.images_seen = state["step"], state["skipped"], state["images_seen"]
        self.window = dict(state["window"])
        if self.dist.is_main:
            print(
                f"resuming {self.run_dir} at step {self.step} of {self.total_steps} from {self.state_path}", flush=True
            )

    def save_state(self) -> None:
        if self.dist.is_main:
            state = {
                "fingerprint": self.fingerprint(),
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "rng": checkpoint.rng_states(),
                "step": self.step,
                "skipped": self.skipped,
                "images_seen": self.images_seen,
                "window": self.window,
            }
            checkpoint.save_atomic(state | self.extra_state(), self.state_path)
        self.dist.barrier()

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
        self.resume()
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
        with bar, StopRequest() as stop:
            for images, noise, corrupt in self.loader():
                if images.numel() == 0:
                    images, noise = self.empty_batch()
                self.scheduler.step_update(self.step)
                loss_sum, count = self.train_step(images, noise)
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
                    raise SystemExit(
                        f"stopped by SIGTERM at step {self.step} of {self.total_steps}; "
                        f"state saved in {self.state_path}"
                    )
        self.save_state()  # also when nothing was left to do, so the state is always final
        return self.finish()

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
