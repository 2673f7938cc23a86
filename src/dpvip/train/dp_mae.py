"""DP MAE training (ViP step 2): DP-AdamW on natural images, from a (Syn)-ViP checkpoint.

Each step: Poisson sampling (every example with probability q = B / n, ranks drawing
disjoint blocks independently); each rank splits its examples into micro-batches of at most
`micro_batch` and adds their per-example clipped gradients (flat L2, C) to a sum; the sums
are all-reduced, N(0, sigma^2 C^2) is added once (the same draw on every rank), the result
is divided by the expected batch size B, and the optimizer steps on every rank alike.
sigma is calibrated from (epsilon, delta, q, T) before the first step; the ledger travels
in the state, the metrics and model.pt. The logged training loss is not privatised: it
is a diagnostic for people, not something the model is released with.
"""

from __future__ import annotations

from pathlib import Path

import torch

from dpvip.files import sha256, write_json
from dpvip.models.checkpoint import load_mae
from dpvip.models.mae import MaskedAutoencoder
from dpvip.plan.data_paths import private_data_name
from dpvip.privacy.clipping import ClippedGradientSum
from dpvip.privacy.ledger import PrivacyLedger
from dpvip.privacy.optimizers import make_optimizer
from dpvip.privacy.randomness import RunRandomness, release_key
from dpvip.privacy.step import DPStep
from dpvip.plan.dp_pretrain import DPPretrainSettings
from dpvip.train.optim import warmup_cosine
from dpvip.train.run import MAERun


class DPMAETraining(MAERun):
    stage = "dp_mae"
    description = "DP MAE training"

    def __init__(
        self,
        settings: DPPretrainSettings,
        data_index: str | Path,
        run_dir: str | Path,
        init: str | Path | None = None,
        progress: bool = True,
    ):
        super().__init__(settings, data_index, run_dir, progress)
        examples = self.sampler_size = settings.examples_of(len(self.reader))
        self.sample_rate = settings.sample_rate(examples)
        ledger = PrivacyLedger.calibrate(
            settings.accountant,
            self.sample_rate,
            settings.steps,
            settings.epsilon,
            settings.delta_for(examples),
            settings.clip_norm,
        )
        self.init = Path(init) if init is not None else None
        self.initialised_fresh: list[str] = []
        if self.init is None:
            torch.manual_seed(settings.seed)
            self.model = MaskedAutoencoder(settings.model).to(self.dist.device)
        else:
            self.model, loaded = load_mae(self.init, settings.model, self.dist.device, decoder_may_differ=True)
            self.initialised_fresh = loaded.get("initialised_fresh", [])
        self.init_fingerprint = sha256(self.init) if self.init else "random"  # once: checkpoints can be large
        clipper = ClippedGradientSum(self.model, settings.clip_norm)
        self.optimizer = make_optimizer(
            settings.optimizer,
            clipper.params,
            settings.lr,
            settings.weight_decay,
            settings.betas,
            settings.momentum,
            settings.adam_eps,
        )
        self.scheduler = warmup_cosine(
            self.optimizer, settings.steps, min(settings.warmup_steps, settings.steps), settings.min_lr
        )
        on_gpu = self.dist.device.type == "cuda"
        self.dp_step = DPStep(
            clipper,
            self.optimizer,
            ledger,
            examples,
            self._randomness(),
            rank=self.dist.rank,
            world=self.dist.world,
            all_reduce=self.dist.sum_tensor,
            autocast=lambda: torch.autocast("cuda", dtype=torch.bfloat16, enabled=on_gpu),
            allow_large_delta=settings.allow_large_delta,
            data=private_data_name({"source": "shards", "shards": str(data_index)}),
        )
        self.sampler = self.dp_step.sampler  # the data loader's batches are the step's Poisson batches
        self.total_steps = settings.steps
        self.last = {"batch_size": 0, "clipped_fraction": 0.0}

    @property
    def ledger(self) -> PrivacyLedger:
        return self.dp_step.ledger

    def _randomness(self) -> RunRandomness:
        """The run's noise and batches: its secret key for work/ in the key store (made by rank
        0 on the first start, only read by the others), or its seed; one stream per run
        fingerprint (settings, shard contents, n and the starting checkpoint's SHA-256), so a
        run restarted with other settings, data or weights never repeats the noise."""
        work, seed = self.run_dir / "work", self.settings.seed
        if self.dist.is_main:
            RunRandomness.for_run(self.settings.randomness, work, seed, {})
        self.dist.barrier()
        randomness = RunRandomness.for_run(
            self.settings.randomness, work, seed, self.run_fingerprint(), create=self.dist.is_main
        )
        self.key_identity = randomness.identity()
        return randomness

    def run_fingerprint(self) -> dict:
        return super().fingerprint() | {"init": self.init_fingerprint, "examples": self.sampler_size}

    def fingerprint(self) -> dict:
        """The run's, and its key's name: a state saved under a key since deleted (the run
        finished, or the key store was lost) is not resumed."""
        return self.run_fingerprint() | {"key": self.key_identity}

    # --- ledger in the state ---------------------------------------------------------------
    def extra_state(self) -> dict:
        return self.dp_step.state_dict(optimizer=False)  # the training run keeps the optimizer's

    def load_extra_state(self, state: dict) -> None:
        self.dp_step.load_state_dict({"privacy": state.get("privacy")}, state["step"], str(self.state_path))

    def log_fields(self) -> dict:
        return {
            "epsilon": self.ledger.epsilon_spent(),
            "delta": self.ledger.delta,
            "noise_multiplier": self.ledger.noise_multiplier,
        } | self.last

    def final_record(self) -> dict:
        init = {"init": str(self.init) if self.init else "random", "initialised_fresh": self.initialised_fresh}
        return {"privacy": self.ledger.record(), "examples": self.sampler.num_samples} | init

    # --- the DP step ------------------------------------------------------------------------
    def train_step(self, images: torch.Tensor, noise: torch.Tensor, unreadable: int = 0) -> tuple[float, int]:
        device, micro = self.dist.device, self.settings.micro_batch

        def micro_batches():
            for x, n in zip(images.split(micro), noise.split(micro)):
                if len(x):
                    x, n = x.to(device, non_blocking=True), n.to(device, non_blocking=True)
                    yield lambda: self.model(x, n).loss.float()

        report = self.dp_step(self.step, micro_batches(), unreadable)
        totals = torch.tensor([report.loss_sum, report.examples, report.clipped], dtype=torch.float64, device=device)
        self.dist.sum_tensor(totals)  # for the logs: loss sum, examples and clipped over ranks
        loss_sum, count, clipped = totals.tolist()
        self.last = {"batch_size": int(count), "clipped_fraction": clipped / max(count, 1)}
        return loss_sum, int(count)

    def finish(self) -> dict:
        record = super().finish()
        if self.dist.is_main:  # the ledger alone, for tables and figures that do not load torch
            write_json(
                record["privacy"] | {"examples": record["examples"], "init": record["init"]},
                self.run_dir / "privacy.json",
            )
            # The run is done: its state and key go, so a forced rerun trains afresh with a new key.
            self.state_path.unlink(missing_ok=True)
            release_key(self.run_dir / "work")
        return record


def dp_train_mae(
    settings: DPPretrainSettings,
    data_index: str | Path,
    run_dir: str | Path,
    init: str | Path | None = None,
    progress: bool = True,
) -> dict:
    """Train (or resume) the DP run in `run_dir`; returns the record stored with model.pt."""
    return DPMAETraining(settings, data_index, run_dir, init, progress).run()
