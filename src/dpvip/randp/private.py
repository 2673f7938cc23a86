"""DP-RandP Phases II and III: DP-SGD on the classifier head of the (Phase I) network, then
on the whole network, under one privacy budget.

One ledger covers the whole run: sigma is calibrated (PRV by default, as the paper) for all
`steps` at q = B / n and (epsilon, delta); Phase II spends the first `phase2_steps` steps
of it and Phase III the rest, so the two phases together spend exactly the run's epsilon,
and the share of Phase II is the accountant's epsilon after `phase2_steps` steps (the
x-axis of the paper's Fig. 6). Epsilon inf is clipping without noise (no ledger).

Each step: the ledger is charged; a Poisson batch is drawn; each example gets K augmented
views from its own seed (`augmult`); its gradient is the mean over its views, clipped to C
as one (`ClippedGradientSum(views=K)`); the sum gets N(0, sigma^2 C^2) once and is divided
by B; SGD steps; the EMA of the weights is updated. The EMA model is what is reported.
In Phase II only the head is trainable: the frozen body has no gradient, and with
GroupNorm (no BatchNorm anywhere) no batch statistic mixes examples in either phase.
The run's state (`state.pt`, a `dpvip.train.resume.LoopState`) is saved every
`checkpoint_every` steps, at the end (before the result is scored) and on SIGTERM (then the
job stops); a rerun resumes it, its ledger checked first.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from dpvip.evaluate.accuracy import classifier_score
from dpvip.files import sha256
from dpvip.per_example import PER_EXAMPLE
from dpvip.models.wrn import WideResNet
from dpvip.privacy.clipping import ClippedGradientSum, refuse_batch_norm
from dpvip.randp.ema import EMA
from dpvip.privacy.ledger import PrivacyLedger
from dpvip.privacy.optimizers import make_optimizer
from dpvip.privacy.randomness import RunRandomness, release_key
from dpvip.privacy.sampling import example_seed
from dpvip.privacy.step import DPStep
from dpvip.randp.augmult import augmult_views
from dpvip.plan.dprandp_private import PrivateSettings
from dpvip.train.resume import LoopState


def fresh_network(model: str, classes: int, seed: int) -> WideResNet:
    """A randomly initialised network (the cold start), its head zeroed like the warm one's."""
    torch.manual_seed(seed)
    network = WideResNet(model, classes)
    nn.init.zeros_(network.classifier.weight)
    nn.init.zeros_(network.classifier.bias)
    return network


def check_no_batchnorm(network: nn.Module) -> None:
    """The clipper's BatchNorm refusal, before any work (the clipper is made at a phase's start)."""
    refuse_batch_norm(network)


class PrivateTraining:
    def __init__(
        self,
        settings: PrivateSettings,
        splits: dict,
        network: nn.Module,
        run_dir: str | Path,
        init: str | Path | None = None,
        progress: bool = True,
        data: str | None = None,
    ):
        settings.check()
        check_no_batchnorm(network)
        self.settings, self.splits, self.network, self.progress = settings, splits, network, progress
        self.data = data  # the private dataset's name in the ledger
        self.train = splits["train"]
        self.examples = len(self.train)
        self.sample_rate = settings.sample_rate(self.examples)
        ledger = None
        if settings.private:
            ledger = PrivacyLedger.calibrate(
                settings.accountant,
                self.sample_rate,
                settings.steps,
                settings.epsilon,
                settings.delta,
                settings.clip_norm,
            )
        self.state_path = Path(run_dir) / "state.pt"
        self.init = str(init) if init else "random"
        self.init_fingerprint = sha256(init) if init else "random"
        self.ema = EMA(network, settings.ema_decay)
        self.device = next(network.parameters()).device
        self.step, self.curve, self.clipped = 0, [], 0
        self.phase = None  # (phase, clipper, optimizer) of the current phase
        self.dp_step: DPStep | None = None  # made with the first phase's clipper; the run's ledger and noise
        self._ledger = ledger
        # The run's noise, batches and augmentations: its secret key for its folder, in the key
        # store (or its seed), one stream per run fingerprint (settings, data, n, start).
        self.run_dir = Path(run_dir)
        self.randomness = RunRandomness.for_run(settings.randomness, run_dir, settings.seed, self.run_fingerprint())
        if self._ledger is not None:  # what a stored ledger is checked against on resume
            self._ledger = self._ledger.of_run(self.randomness.mode, self.examples, data, self.randomness.identity())
        self.saved = LoopState(self.state_path, self.fingerprint(), settings.checkpoint_every, total=settings.steps)

    @property
    def ledger(self) -> PrivacyLedger | None:
        return self.dp_step.ledger if self.dp_step else self._ledger

    def run_fingerprint(self) -> dict:
        return {
            "settings": self.settings.fingerprint(),
            "init": self.init_fingerprint,
            "examples": self.examples,
            "data": self.train.digest(),
        }

    def fingerprint(self) -> dict:
        """The run's, and its key's name: a state saved under another key is not resumed."""
        return self.run_fingerprint() | {"key": self.randomness.identity()}

    # --- phases ----------------------------------------------------------------------------
    def _enter(self, phase: int) -> None:
        """Make the head (phase 2) or everything (phase 3) trainable, with its own clipper
        and SGD optimizer."""
        if self.phase and self.phase[0] == phase:
            return
        if self.phase:
            self.phase[1].close()
        for name, param in self.network.named_parameters():
            param.requires_grad_(phase == 3 or name.startswith("classifier."))
        s = self.settings
        clipper = ClippedGradientSum(self.network, s.clip_norm, views=s.augmult)
        optimizer = make_optimizer(
            "sgd", clipper.params, s.lr_phase2 if phase == 2 else s.lr_phase3, momentum=s.momentum
        )
        self.phase = (phase, clipper, optimizer)
        if self.dp_step is None:
            self.dp_step = DPStep(
                clipper,
                optimizer,
                self._ledger,
                self.examples,
                self.randomness,
                sample_rate=self.sample_rate,
                steps=s.steps,
                allow_large_delta=s.allow_large_delta,
                data=self.data,
            )
        self.dp_step.clipper, self.dp_step.optimizer = clipper, optimizer

    def _micro_batches(self, chosen):
        """Forward passes over the chosen examples' augmented views (seeded per example and step)."""
        s = self.settings
        for start in range(0, len(chosen), s.micro_batch):
            indices = chosen[start : start + s.micro_batch]
            seeds = [example_seed(self.randomness, self.step, int(i)) for i in indices]
            views = augmult_views(self.train.images[indices].to(self.device), seeds, s.augmult, s.padding)
            labels = self.train.labels[indices].to(self.device).repeat_interleave(s.augmult)
            yield lambda: F.cross_entropy(self.network(views), labels, reduction="none")

    def _step(self) -> float:
        self._enter(2 if self.step < self.settings.phase2_steps else 3)
        self.network.train()
        chosen = self.dp_step.batch(self.step)
        report = self.dp_step(self.step, self._micro_batches(chosen))
        self.clipped += report.clipped
        self.ema.update(self.step)
        self.step += 1
        self.curve.append(
            {
                "step": self.step,
                "phase": self.phase[0],
                "loss": report.loss_sum / max(1, len(chosen)),
                "batch_size": len(chosen),
            }
        )
        return self.curve[-1]["loss"]

    # --- state -----------------------------------------------------------------------------
    def snapshot(self) -> dict:
        """What the state holds beside the step, fingerprint and RNG states."""
        phase = self.phase
        return {
            "network": self.network.state_dict(),
            "ema": self.ema.state_dict(),
            "optimizer": phase[2].state_dict() if phase else None,
            "phase": phase[0] if phase else None,
            # the ledger's mechanism and steps; its epsilon is computed once, for the result
            "curve": self.curve,
            "clipped": self.clipped,
            "privacy": dataclasses.asdict(self.ledger) if self.ledger else None,
        }

    def _check_ledger(self, state: dict) -> None:
        # Before the fingerprint: another mechanism is named as such, not as another key.
        if self._ledger:
            self._ledger = self._ledger.resumed(state["privacy"], state["step"], str(self.state_path))

    def resume(self) -> None:
        state = self.saved.restore("cpu", check=self._check_ledger)
        if state is None:
            return
        self.network.load_state_dict(state["network"])
        self.ema.load_state_dict(state["ema"])
        if state["phase"]:
            self._enter(state["phase"])
            self.phase[2].load_state_dict(state["optimizer"])
        self.step, self.curve, self.clipped = state["step"], list(state["curve"]), state["clipped"]

    # --- the run ---------------------------------------------------------------------------
    def run(self) -> dict:
        s = self.settings
        with self.saved:
            self.resume()
            started = time.perf_counter()
            bar = tqdm(
                total=s.steps, initial=self.step, desc="DP-RandP phases II/III", unit="step", disable=not self.progress
            )
            with bar:
                while self.step < s.steps:
                    loss = self._step()
                    bar.update()
                    bar.set_postfix(phase=self.phase[0], loss=f"{loss:.3f}")
                    self.saved.after_step(self.step, self.snapshot, last=self.step == s.steps)
            # Before the scoring: a job killed while it scores does not train again.
            self.saved.save(self.step, self.snapshot)
        if self.phase:
            self.phase[1].close()
        result = self.result(time.perf_counter() - started)
        # The run is done: its state and key go, so a forced rerun trains afresh with a new key.
        self.saved.clear()
        release_key(self.run_dir)
        return result

    def privacy_record(self) -> dict:
        if not self.ledger:
            return {
                "accountant": None,
                "sample_rate": self.sample_rate,
                "noise_multiplier": 0.0,
                "clip_norm": self.settings.clip_norm,
                "delta": None,
                "target_epsilon": None,
                "planned_steps": self.settings.steps,
                "steps_done": self.step,
                "epsilon_spent": None,
                "epsilon_phase2": None,
                "examples": self.examples,
            }
        phase2 = dataclasses.replace(self.ledger, steps_done=min(self.settings.phase2_steps, self.ledger.steps_done))
        return self.ledger.record() | {"epsilon_phase2": phase2.epsilon_spent(), "examples": self.examples}

    def scores(self, model: nn.Module) -> tuple[dict, dict]:
        """({split: accuracy in percent, None where the split is absent}, {split: its
        per-example correctness record}) on the test and validation splits."""
        accuracy, records = {}, {}
        for split in ("test", "validation"):
            data = self.splits.get(split)
            if data is None:
                accuracy[split] = None
                continue
            fraction, records[split] = classifier_score(model, data)
            accuracy[split] = 100.0 * fraction
        return accuracy, records

    def result(self, seconds: float) -> dict:
        s = self.settings
        (ema, ema_records), (live, live_records) = self.scores(self.ema.averaged), self.scores(self.network)
        return {
            "accuracy": ema,
            "accuracy_live": live,
            PER_EXAMPLE: {"accuracy": ema_records, "accuracy_live": live_records},
            "privacy": self.privacy_record(),
            "batch_size": s.batch_size,
            "augmult": s.augmult,
            "steps": s.steps,
            "lr_phase2": s.lr_phase2,
            "lr_phase3": s.lr_phase3,
            "clipped_fraction": self.clipped / max(1, sum(point["batch_size"] for point in self.curve)),
            "init_checkpoint": self.init,
            "curve": self.curve,
            "settings": s.fingerprint(),
            "seconds": seconds,
        }


def train_private(
    settings: PrivateSettings,
    splits: dict,
    network: nn.Module,
    run_dir: str | Path,
    init: str | Path | None = None,
    progress: bool = True,
    data: str | None = None,
) -> dict:
    """Run (or resume) Phases II and III of one run; returns its result (without the run's
    identity and data facts, which the caller adds). `data`: the private dataset's name in
    the ledger (`DPStep`)."""
    return PrivateTraining(settings, splits, network, run_dir, init, progress, data).run()
