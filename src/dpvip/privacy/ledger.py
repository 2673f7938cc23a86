"""The privacy ledger of a DP training run: its mechanism, its budget and what it has spent.

The noise multiplier is calibrated from (epsilon, delta, q, T) with the run's accountant
before the first step (or, for DP fine-tuning, given: the budget is then the epsilon its T
steps spend) and recorded; every checkpoint and metrics record carries the ledger.
A step is charged before it is taken, and a run refuses a step past its planned T (the
calibration makes T steps spend at most the target epsilon), so it never exceeds its budget.
A resumed run continues the stored ledger and refuses other q, sigma, C or accountant.

The ledger also says where the run's randomness came from (`secret`, or `seeded`: not
private) and n, the examples the guarantee is about, so that its record gives delta * n and
flags delta >= 1/n (a delta that large lets a mechanism publish one example outright).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace

from dpvip.errors import DpvipInputError
from dpvip.privacy import accounting
from dpvip.privacy.randomness import NOT_PRIVATE


class BudgetExceeded(DpvipInputError):
    """A step would spend more than the run's budget."""


@dataclass(frozen=True)
class PrivacyLedger:
    accountant: str
    sample_rate: float
    noise_multiplier: float
    clip_norm: float
    delta: float
    target_epsilon: float
    planned_steps: int
    steps_done: int = 0
    randomness: str = "secret"  # or "seeded": not private (set by the run's DPStep)
    examples: int | None = None  # n (set by the run's DPStep)
    # Set by the run's DPStep, not part of the mechanism (a checkpoint without them resumes):
    data: str | None = None  # the private dataset's name: releases on one name compose
    run: str | None = None  # the run's key's name (`RunRandomness.identity`): one release, however often published

    # What a resumed run must share with the stored ledger.
    MECHANISM = (
        "accountant",
        "sample_rate",
        "noise_multiplier",
        "clip_norm",
        "delta",
        "target_epsilon",
        "planned_steps",
        "randomness",
        "examples",
    )

    @classmethod
    def calibrate(
        cls, accountant: str, sample_rate: float, steps: int, target_epsilon: float, delta: float, clip_norm: float
    ) -> PrivacyLedger:
        """The ledger of a new run, before any step: the smallest noise multiplier sigma with
        which `steps` steps stay within (`target_epsilon`, `delta`)-DP.

        - `accountant`: "rdp" (opacus' RDP), "prv" (opacus' PRV) or "pld" (dp-accounting's
          PLD; `ACCOUNTANTS`), which calibrates sigma and later reports `epsilon_spent()`;
        - `sample_rate`: q, each example's probability of being in a step's Poisson batch
          (expected batch / n; 1.0 for full-batch steps);
        - `steps`: the planned steps T; a step past them raises `BudgetExceeded`;
        - `target_epsilon`, `delta`: the budget; delta should be below 1/n (`DPStep` refuses
          delta >= 1/n unless `allow_large_delta=True`);
        - `clip_norm`: C, each example's gradient norm bound, which the `ClippedGradientSum`
          given to `DPStep` must use (the noise is N(0, (sigma C)^2)).

        Calibrations are kept in a disk memo (`dpvip.memo`), so the same question is answered
        once per machine."""
        calibration = accounting.noise_multiplier(sample_rate, steps, target_epsilon, delta, accountant)
        return cls(accountant, sample_rate, calibration.noise_multiplier, clip_norm, delta, target_epsilon, steps)

    @classmethod
    def for_noise(
        cls, accountant: str, sample_rate: float, noise_multiplier: float, steps: int, delta: float, clip_norm: float
    ) -> PrivacyLedger:
        """The ledger of a new run whose sigma is given, not calibrated (ViP's DP fine-tuning):
        its budget is the epsilon that its planned steps spend."""
        budget = _epsilon(accountant, sample_rate, noise_multiplier, steps, delta)
        return cls(accountant, sample_rate, noise_multiplier, clip_norm, delta, budget, steps)

    def epsilon_spent(self) -> float:
        if self.steps_done == 0:
            return 0.0
        return _epsilon(self.accountant, self.sample_rate, self.noise_multiplier, self.steps_done, self.delta)

    def charge(self, steps: int = 1) -> PrivacyLedger:
        """The ledger after `steps` more steps; refuses to go past the planned steps."""
        if self.steps_done + steps > self.planned_steps:
            raise BudgetExceeded(
                f"step {self.steps_done + steps} would exceed the privacy budget: epsilon {self.target_epsilon} "
                f"at delta {self.delta:.3g} allows {self.planned_steps} steps at q={self.sample_rate:.6g}, "
                f"sigma={self.noise_multiplier:.6g}"
            )
        return replace(self, steps_done=self.steps_done + steps)

    def of_run(self, randomness: str, examples: int, data: str | None = None, run: str | None = None) -> PrivacyLedger:
        """This ledger, recording where the run's randomness comes from, its n, the private
        dataset's name and the run's key's name."""
        return replace(self, randomness=randomness, examples=examples, data=data, run=run)

    @property
    def private(self) -> bool:
        return self.randomness == "secret"

    def record(self) -> dict:
        """The ledger with the epsilon spent so far, delta * n and its flag, and (seeded
        runs) that the run is not private: for checkpoints and metrics."""
        record = asdict(self) | {"epsilon_spent": self.epsilon_spent(), "private": self.private}
        if self.examples:
            record |= {
                "delta_n": self.delta * self.examples,
                "delta_at_least_1_over_n": self.delta * self.examples >= 1,
            }
        return record if self.private else record | {"note": NOT_PRIVATE}

    @classmethod
    def from_record(cls, record: dict) -> PrivacyLedger:
        return cls(**{key: record[key] for key in (*cls.MECHANISM, "steps_done")})

    def resumed(self, record: dict, step: int, where: str) -> PrivacyLedger:
        """The stored ledger `record` of checkpoint `where`, whose run is at `step`, after
        checking it has this ledger's mechanism and has counted exactly `step` steps."""
        stored = PrivacyLedger.from_record(record)
        self.check_resume(stored, where)
        if stored.steps_done != step:
            raise DpvipInputError(f"{where}: its ledger counts {stored.steps_done} steps, its state {step}")
        return replace(stored, data=self.data, run=self.run)

    def check_resume(self, stored: PrivacyLedger, where: str) -> None:
        """Refuse to continue `stored` (from checkpoint `where`) with another mechanism."""
        for key in self.MECHANISM:
            if getattr(stored, key) != getattr(self, key):
                raise DpvipInputError(
                    f"{where} was trained with {key} {getattr(stored, key)!r}, not {getattr(self, key)!r}: "
                    "resuming with another mechanism would break its privacy accounting; delete it to start over"
                )


def _epsilon(accountant: str, sample_rate: float, sigma: float, steps: int, delta: float) -> float:
    # Logs, checkpoints and the final record ask for the same steps: accounting keeps its answers (dpvip.memo).
    mechanism = accounting.Mechanism(sample_rate, sigma, steps)
    return accounting.epsilon([mechanism], delta, accountant).epsilon


def ledgers(value) -> Iterator[dict]:
    """Every run's ledger record inside `value` (a result file's JSON, nested): the mappings
    that say where the run's randomness came from."""
    if isinstance(value, dict):
        if "randomness" in value and "private" in value:
            yield value
        for item in value.values():
            yield from ledgers(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from ledgers(item)
