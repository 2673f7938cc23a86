"""The DP step: the one place where a DP training loop of dpvip spends privacy.

Every DP path (DP-MAE pre-training, DP fine-tuning, DP-RandP Phases II/III, Mehta et al.'s
head and DP-RandP's private probe) takes its steps through a `DPStep`, which in order:

1. charges the ledger (before the noisy gradient exists; a step past the budget is refused);
2. draws the step's Poisson batch (`batch(step)`, or its `sampler` as a data loader's batch
   sampler; the rate is the ledger's q);
3. adds each micro-batch's per-example clipped gradients to a sum (`ClippedGradientSum`,
   with augmentation multiplicity when the clipper has views);
4. sums over ranks, adds N(0, (sigma C)^2) once, sigma and C being the ledger's, and divides
   by the expected batch q n (`privatize_`);
5. writes the result into `.grad` and steps the optimizer.

The noise of step t and its batch come from the run's `RunRandomness`
(`dpvip.privacy.randomness`): a keyed derivation of (noise, t) and of (inclusion, t, block)
from the run's secret, or, in `seeded` mode (not private), from its published seed.

Without a ledger (DP-RandP's epsilon inf) the step clips without noise, at the sample rate
it is given: what the paper's non-private column does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

import numpy as np
import torch

from dpvip.errors import DpvipInputError
from dpvip.privacy import refuse_large_delta
from dpvip.privacy.clipping import ClippedGradientSum
from dpvip.privacy.ledger import PrivacyLedger
from dpvip.privacy.noise import noise_stream, privatize_
from dpvip.privacy.optimizers import set_gradients
from dpvip.privacy.randomness import RunRandomness
from dpvip.privacy.sampling import PoissonBatches

Losses = Callable[[], torch.Tensor]  # a forward pass: per-example losses (K rows each with K views)


@dataclass(frozen=True)
class StepReport:
    """What one step saw, computed on the private batch without noise: diagnostics, outside
    the run's (epsilon, delta) guarantee wherever they are published."""

    loss_sum: float  # sum over examples of their losses (mean over an example's views)
    examples: int  # this rank's realised batch
    clipped: int  # examples whose gradient norm exceeded C


class DPStep:
    """Steps of one DP run. `clipper` and `optimizer` may be replaced between steps (DP-RandP
    changes both between its phases); the ledger, sampler and noise stay the run's."""

    def __init__(
        self,
        clipper: ClippedGradientSum,
        optimizer: torch.optim.Optimizer,
        ledger: PrivacyLedger | None,
        examples: int,
        randomness: RunRandomness,
        *,
        sample_rate: float | None = None,
        steps: int | None = None,
        rank: int = 0,
        world: int = 1,
        all_reduce: Callable[[torch.Tensor], None] = lambda flat: None,
        autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
        allow_large_delta: bool = False,
        data: str | None = None,
    ):
        if ledger is not None:
            refuse_large_delta(ledger.delta, examples, allow_large_delta)
            sample_rate, steps = ledger.sample_rate, ledger.planned_steps
            # the ledger records where the randomness comes from, what n its delta is about,
            # the private data (releases on one dataset compose) and the run (counted once)
            ledger = ledger.of_run(randomness.mode, examples, data, randomness.identity())
        elif sample_rate is None or steps is None:
            raise DpvipInputError("a DP step without a ledger needs its sample rate and steps")
        self.clipper, self.optimizer, self.ledger = clipper, optimizer, ledger
        self.sampler = PoissonBatches(examples, sample_rate, steps, randomness, rank, world)
        self.expected_batch_size = sample_rate * examples
        self.randomness = randomness
        self.all_reduce, self.autocast = all_reduce, autocast

    @property
    def noise_multiplier(self) -> float:
        return self.ledger.noise_multiplier if self.ledger is not None else 0.0

    @property
    def full_batch(self) -> bool:
        return self.sampler.sample_rate == 1.0

    def batch(self, step: int) -> np.ndarray:
        """This rank's examples at `step` (indices, increasing)."""
        return self.sampler.indices(step)

    def __call__(self, step: int, micro_batches: Iterable[Losses], unreadable: int = 0) -> StepReport:
        """Step `step` on `micro_batches` (this rank's examples of `batch(step)`, as forward
        passes returning per-example losses). `unreadable`: examples of the batch that could
        not be read (corrupt samples, skipped and counted); they add nothing to the sum, as
        a zero gradient would, which the clipping bound allows."""
        clipper = self.clipper
        if self.ledger is not None:
            if step != self.ledger.steps_done:  # a repeated number would repeat its batch and noise
                raise DpvipInputError(
                    f"step {step} is not the ledger's next step {self.ledger.steps_done}: each step number is "
                    "taken once, as its Poisson batch and noise are drawn from it"
                )
            if clipper.clip_norm != self.ledger.clip_norm:
                raise DpvipInputError(
                    f"the clipper's norm {clipper.clip_norm} is not the ledger's {self.ledger.clip_norm}"
                )
            self.ledger = self.ledger.charge()  # before the noisy gradient exists
        clipper.reset()
        device = clipper.sums[0].device if clipper.sums else torch.device("cpu")
        # Summed on the device, read once at the end: no synchronisation per micro-batch.
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        clipped = torch.zeros((), dtype=torch.int64, device=device)
        for losses_of in micro_batches:
            with self.autocast():
                losses, norms = clipper.add(losses_of)
            loss_sum += losses.sum().double() / clipper.views
            clipped += (norms > clipper.clip_norm).sum()
        self._check_batch(step, clipper.examples + unreadable)
        stream = noise_stream(self.randomness, step, device)
        # In place: the clipper's sums are reset before they are used again.
        privatize_(
            clipper.flat, self.noise_multiplier, clipper.clip_norm, self.expected_batch_size, stream, self.all_reduce
        )
        set_gradients(clipper.params, clipper.sums)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return StepReport(float(loss_sum), clipper.examples, int(clipped))

    def _check_batch(self, step: int, given: int) -> None:
        """Refuse micro-batches that are not this rank's Poisson batch of `step`: the
        accounting assumes it (a shuffled DataLoader's fixed batches would make its epsilon
        wrong). Checked before the noisy gradient reaches the model; the step stays charged."""
        drawn = len(self.batch(step))
        if given != drawn:
            raise DpvipInputError(
                f"step {step}: the micro-batches hold {given} examples, but this rank's Poisson batch for the step "
                f"holds {drawn}: feed the examples of dp_step.batch(step) (or a DataLoader with "
                "batch_sampler=IndexBatches(dp_step.sampler)), which the privacy accounting assumes"
            )

    # --- checkpoints ------------------------------------------------------------------------
    def state_dict(self, optimizer: bool = True) -> dict:
        """What a checkpoint keeps of the DP run: the ledger (its mechanism and the steps
        taken: the Poisson batches and the noise are functions of the key and the step number,
        so the step count is all the position the sampler has) and the optimizer's state
        (`optimizer=False` where the training loop saves it itself)."""
        state = {"privacy": asdict(self.ledger) if self.ledger is not None else None}
        return state | ({"optimizer": self.optimizer.state_dict()} if optimizer else {})

    def load_state_dict(self, state: dict, step: int, where: str) -> None:
        """Continue from a checkpoint's `state` (`where`: its file, for messages), whose loop
        is at `step`: a DP run refuses a state without a ledger, a ledger of another mechanism
        and one that counts other steps; then the optimizer's state, if the state has one."""
        if self.ledger is not None:
            if not state.get("privacy"):
                raise DpvipInputError(f"{where} holds no privacy ledger; it is not a DP run's state")
            self.ledger = self.ledger.resumed(state["privacy"], step, where)
        if state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])

    def close(self) -> None:
        """Take the clipper's hooks off the model (the model then trains or evaluates as usual)."""
        self.clipper.close()
