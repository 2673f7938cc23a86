"""White-box gradient canaries, inserted through the one DP step (`DPStep`), and the scores an
attacker who sees every update gives them.

The audited network is two bias-free Linear layers side by side (`CanaryModel`). Canary j is
an example whose loss is s * y[layer_j, out_j] for the one-hot input e_(in_j) of its layer:
its gradient is s on one weight, (layer_j, out_j, in_j), and zero elsewhere, so it passes the
real clipper (C caps it; a layer left unclipped lets s through), the real Poisson sampling,
the real noise and the real ledger. Canaries sit on distinct weights, so every weight's
coordinate of the privatized gradient sees exactly one canary (or none). The attacker reads
canary j's coordinate at every step, y_t in units of C / (q n) (the shift one inclusion
makes), and scores it by the log likelihood ratio of "member" (y_t = Bernoulli(q) + sigma z)
against "not" (y_t = sigma z) over its T steps (`likelihood_ratio`), as Nasr et al.
(2023) audit DP-SGD with Dirac gradient canaries: for a Poisson-subsampled run it sees the
steps a canary was drawn in, which a summed score dilutes over all T; for a full-batch run it
is the sum, shifted and scaled. Each canary is in the training set with probability 1/2 (Steinke et al.'s
one-run audit); the same scores, split by membership, are the trials of a tight audit (all
canaries are alike, their coordinates' noise independent).

`audit_run` runs one mechanism (accountant, q, T, epsilon, delta, C) with m canaries and a
fresh secret key, and returns the scores, membership and the ledger's spent epsilon;
`audit_mechanism` turns a few such runs into the one-run and the tight lower bounds, for a
mechanism read from a run's own ledger (`mechanism_from_ledger`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import secrets

import numpy as np
import torch
from torch import nn

from dpvip.errors import DpvipInputError
from dpvip.audit import AUDITED_MECHANISMS
from dpvip.privacy import ACCOUNTANTS
from dpvip.audit.bounds import (
    VALID_BOUNDS,
    AuditSettings,
    check_canaries,
    gdp_epsilon,
    gdp_power,
    headline_confidence,
    one_run_bound,
    one_run_epsilon,
    one_run_power,
    tight_epsilon,
    tight_power,
)
from dpvip.privacy.clipping import ClippedGradientSum
from dpvip.audit.input_canaries import black_box_run
from dpvip.privacy.ledger import PrivacyLedger, ledgers
from dpvip.privacy.randomness import RunRandomness
from dpvip.privacy.step import DPStep


@dataclass(frozen=True)
class AuditMechanism:
    """A DP mechanism as its run configures it (sigma calibrated, unless given)."""

    name: str
    accountant: str
    sample_rate: float
    steps: int
    epsilon: float
    delta: float
    clip_norm: float = 1.0
    noise_multiplier: float | None = None  # given instead of calibrated (DP fine-tuning)

    def check(self) -> None:
        if self.name not in AUDITED_MECHANISMS:
            raise DpvipInputError(f"mechanism '{self.name}' is not one of {', '.join(AUDITED_MECHANISMS)}")
        if not (self.epsilon > 0 and np.isfinite(self.epsilon)):
            raise DpvipInputError(f"audited epsilon {self.epsilon} must be positive and finite")
        if not 0 < self.sample_rate <= 1:
            raise DpvipInputError(f"audited sample rate {self.sample_rate} is outside (0, 1]")
        if self.steps < 1:
            raise DpvipInputError(f"audited steps {self.steps} must be at least 1")

    def ledger(self, examples: int) -> PrivacyLedger:
        if self.noise_multiplier is not None:
            return PrivacyLedger.for_noise(
                self.accountant, self.sample_rate, self.noise_multiplier, self.steps, self.delta, self.clip_norm
            )
        return PrivacyLedger.calibrate(
            self.accountant, self.sample_rate, self.steps, self.epsilon, self.delta, self.clip_norm
        )


class CanaryModel(nn.Module):
    """Two bias-free width x width Linear layers side by side: input (b, 2, width)."""

    def __init__(self, width: int):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width, bias=False) for _ in range(2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([layer(x[:, k]) for k, layer in enumerate(self.layers)], dim=1)


class _Recorder(torch.optim.Optimizer):
    """An optimizer that reads each step's privatized gradient at the canaries' weights, in
    units of one inclusion's shift, and adds it to each canary's sum and its likelihood ratio
    to its score (all the white-box audit needs: T x m observations would not fit at paper
    scale); it leaves the weights alone (a Linear layer's gradient of a linear loss does not
    depend on them)."""

    def __init__(self, params, coordinates: np.ndarray, width: int, shift: float, sample_rate: float, sigma: float):
        super().__init__(params, {})
        self.index = torch.as_tensor(np.ravel_multi_index(tuple(coordinates.T), (2, width, width)))
        self.shift, self.sample_rate, self.sigma = shift, sample_rate, sigma
        self.sums, self.scores = np.zeros(len(coordinates)), np.zeros(len(coordinates))

    def step(self, closure=None):
        grads = [p.grad.reshape(-1) for group in self.param_groups for p in group["params"]]
        observed = torch.cat(grads)[self.index].double().numpy() / self.shift
        self.sums += observed
        self.scores += likelihood_ratio(observed, self.sample_rate, self.sigma)


@dataclass
class CanaryRun:
    sums: np.ndarray  # (m,): the sum over steps of each canary's coordinate, in units of one inclusion's shift
    scores: np.ndarray  # (m,): the log likelihood ratio of its T steps, higher = more likely a member
    included: np.ndarray  # (m,) bool
    epsilon_spent: float
    noise_multiplier: float


def likelihood_ratio(observed: np.ndarray, sample_rate: float, noise_multiplier: float) -> np.ndarray:
    """log[(1 - q) N(y; 0, sigma^2) + q N(y; 1, sigma^2)] - log N(y; 0, sigma^2) of each
    observation y of one step: summed over a canary's T steps, the most powerful test of its
    inclusion (Neyman-Pearson) when the run is what it claims."""
    shifted = (np.asarray(observed, dtype=float) - 0.5) / noise_multiplier**2
    if sample_rate >= 1:
        return shifted
    return np.logaddexp(np.log1p(-sample_rate), np.log(sample_rate) + shifted)


def canary_coordinates(count: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """(count, 3) distinct (layer, out, in) weights."""
    if count > 2 * width * width:
        raise DpvipInputError(f"{count} canaries need more than the {2 * width * width} weights of width {width}")
    flat = rng.choice(2 * width * width, size=count, replace=False)
    return np.stack(np.unravel_index(flat, (2, width, width)), axis=1)


def audit_run(
    mechanism: AuditMechanism,
    canaries: int,
    width: int,
    scale: float = 1.0,
    micro_batch: int = 4096,
    randomness: RunRandomness | None = None,
    make_step: Callable[..., DPStep] = DPStep,
    world: int = 1,
) -> CanaryRun:
    """One DP run of `mechanism` on `canaries` canaries (pre-clip gradient norm `scale` x C),
    each a member with probability 1/2, under `randomness` (default: a fresh secret key in a
    temporary folder; seeded ones make tests repeatable); returns every canary's white-box
    score. `make_step` builds the DP step (tests inject bugs there). `world` > 1 runs the
    ranks of a multi-process run as threads, each with its blocks of the Poisson batch and a
    summing all-reduce, as DP-MAE's ranks do."""
    mechanism.check()
    check_canaries(canaries)
    randomness = randomness or RunRandomness.fresh()  # never resumed: no key is stored
    # membership and placement are the auditor's choices: from the run's key too, so
    # that two audit runs never repeat them
    rng = np.random.default_rng(randomness.entropy("canaries", 0))
    coordinates = canary_coordinates(canaries, width, rng)
    included = rng.random(canaries) < 0.5
    members = coordinates[included]
    if len(members) == 0:
        raise DpvipInputError("no canary was drawn into the training set: use more canaries")
    ledger = mechanism.ledger(len(members))
    reduce = _ThreadSum(world)
    ranks = [
        _Rank(
            mechanism,
            ledger,
            coordinates,
            included,
            width,
            scale,
            micro_batch,
            randomness,
            make_step,
            rank,
            world,
            reduce,
        )
        for rank in range(world)
    ]
    if world == 1:
        ranks[0].run()
    else:
        threads = [threading.Thread(target=rank.run) for rank in ranks]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    errors = [rank.error for rank in ranks if rank.error is not None]
    if errors:  # the first real failure, not a rank's broken wait for it
        raise next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)), errors[0])
    recorder = ranks[0].recorder
    return CanaryRun(recorder.sums, recorder.scores, included, ranks[0].spent, ledger.noise_multiplier)


class _ThreadSum:
    """A summing all-reduce between `world` threads (ranks): each writes its part, all wait,
    each reads the sum in rank order, all wait again before the next call."""

    def __init__(self, world: int):
        self.parts: list[torch.Tensor | None] = [None] * world
        self.barrier = threading.Barrier(world) if world > 1 else None

    def __call__(self, flat: torch.Tensor, rank: int) -> None:
        if self.barrier is None:
            return
        self.parts[rank] = flat.clone()
        self.barrier.wait()
        flat.copy_(sum(self.parts))
        self.barrier.wait()


class _Rank:
    """One rank of an audit run: its model copy, clipper, recorder and DP step."""

    def __init__(
        self,
        mechanism,
        ledger,
        coordinates,
        included,
        width,
        scale,
        micro_batch,
        randomness,
        make_step,
        rank,
        world,
        reduce,
    ):
        self.mechanism, self.members, self.width = mechanism, coordinates[included], width
        self.strength, self.micro_batch = scale * mechanism.clip_norm, micro_batch
        self.model = CanaryModel(width)
        self.clipper = ClippedGradientSum(self.model, mechanism.clip_norm)
        shift = mechanism.clip_norm / (mechanism.sample_rate * len(self.members))  # one inclusion, clipped
        self.recorder = _Recorder(
            self.clipper.params, coordinates, width, shift, mechanism.sample_rate, ledger.noise_multiplier
        )
        # n is the canaries drawn in: an audit may hold more than 1/delta of them
        self.dp_step = make_step(
            self.clipper,
            self.recorder,
            ledger,
            len(self.members),
            randomness,
            rank=rank,
            world=world,
            all_reduce=lambda flat: reduce(flat, rank),
            allow_large_delta=True,
        )
        self.reduce = reduce
        self.error: BaseException | None = None
        self.spent = 0.0

    def run(self) -> None:
        try:
            for step in range(self.mechanism.steps):
                chosen = self.members[self.dp_step.batch(step)]
                self.dp_step(step, _micro_batches(self.model, chosen, self.width, self.strength, self.micro_batch))
            self.spent = self.dp_step.ledger.epsilon_spent()
        except BaseException as error:  # a rank's failure is raised by the caller
            self.error = error
            if self.reduce.barrier is not None:
                self.reduce.barrier.abort()  # the other ranks stop waiting for this one
        finally:
            self.clipper.close()


def _micro_batches(model: CanaryModel, chosen: np.ndarray, width: int, strength: float, size: int):
    for start in range(0, len(chosen), size):
        part = torch.as_tensor(chosen[start : start + size])
        rows = torch.arange(len(part))
        inputs = torch.zeros(len(part), 2, width)
        inputs[rows, part[:, 0], part[:, 2]] = 1.0

        def losses(part=part, rows=rows, inputs=inputs):
            return strength * model(inputs)[rows, part[:, 0], part[:, 1]]

        yield losses


def mechanism_from_ledger(name: str, result: dict) -> AuditMechanism:
    """The mechanism of the DP run recorded in `result` (a privacy.json, a result file or a
    study: its run of the largest epsilon, where a leak shows most), with its sigma as it ran:
    the audit's claimed epsilon is what its T steps spend. DP-RandP's probe records its exact
    Gaussian composition; its full-batch steps are audited with PLD, exact at q = 1."""
    found = max(
        ledgers(result), key=lambda ledger: ledger.get("epsilon_spent", ledger.get("epsilon")) or 0, default=None
    )
    if found is None:
        raise DpvipInputError(f"{name}: the result holds no DP run's ledger to audit")
    accountant = found.get("accountant")
    return AuditMechanism(
        name,
        accountant if accountant in ACCOUNTANTS else "pld",
        float(found.get("sample_rate", 1.0)),
        int(found.get("planned_steps", found.get("steps", 0))),
        float(found.get("epsilon_spent", found.get("epsilon")) or 0.0),
        float(found["delta"]),
        float(found["clip_norm"]),
        float(found.get("noise_multiplier", found.get("sigma_sgd"))),
    )


def audit_mechanism(
    mechanism: AuditMechanism,
    settings: AuditSettings,
    make_step: Callable[..., DPStep] = DPStep,
    world: int = 1,
    seed: int | None = None,
) -> dict:
    """The empirical lower bounds on `mechanism`'s epsilon beside the epsilon it claims, each
    with its power. `make_step` and `world` reach the white-box runs (tests inject bugs);
    `seed` makes white-box run k seeded by seed + k (NOT private: repeatable tests), where
    by default each run draws a fresh secret. The tight audit's halves are cut at random from
    a seed drawn before any score (`seed` where given) and recorded; the headline is the
    largest valid column, each read at the Bonferroni confidence (`headline_confidence`)."""
    settings.check()
    split_seed = secrets.randbits(63) if seed is None else seed
    count = iter(range(settings.runs_for(mechanism.sample_rate)))

    def white_box_run() -> CanaryRun:
        k = next(count)
        return audit_run(
            mechanism,
            settings.canaries,
            settings.width,
            settings.canary_norm,
            randomness=None if seed is None else RunRandomness.seeded(seed + k),
            make_step=make_step,
            world=world,
        )

    first = white_box_run()
    guesses, one_run = one_run_bound(
        first.scores, first.included, settings.guesses, mechanism.delta, settings.confidence
    )
    runs = [(first.scores, first.included)]  # scores only: a run's observations are T x m
    for _ in range(settings.runs_for(mechanism.sample_rate) - 1):
        run = white_box_run()
        runs.append((run.scores, run.included))
    black_box = black_box_run(mechanism, settings.black_box_canaries)
    black_guesses, one_run_black = one_run_bound(
        black_box.scores, black_box.included, settings.guesses, mechanism.delta, settings.confidence
    )
    inside = np.concatenate([scores[included] for scores, included in runs])
    outside = np.concatenate([scores[~included] for scores, included in runs])
    tight = tight_epsilon(inside, outside, mechanism.delta, settings.confidence, split_seed)
    gdp = gdp_epsilon(inside, outside, mechanism.delta, settings.confidence, split_seed)
    each = headline_confidence(settings.confidence, len(VALID_BOUNDS))
    headline = max(
        one_run_epsilon(guesses.canaries, guesses.guesses, guesses.correct, mechanism.delta, each),
        one_run_epsilon(black_guesses.canaries, black_guesses.guesses, black_guesses.correct, mechanism.delta, each),
        tight_epsilon(inside, outside, mechanism.delta, each, split_seed, chosen_at=settings.confidence),
    )
    power = {  # the largest bound each column can report: every guess right, no error
        "one_run_white_box": one_run_power(settings.canaries, guesses.guesses, mechanism.delta, settings.confidence),
        "one_run_black_box": one_run_power(
            settings.black_box_canaries, black_guesses.guesses, mechanism.delta, settings.confidence
        ),
        "tight_white_box": tight_power(len(inside), len(outside), mechanism.delta, settings.confidence),
        "gdp_white_box": gdp_power(len(inside), len(outside), mechanism.delta, settings.confidence),
    }
    return {
        "mechanism": mechanism.name,
        "accountant": mechanism.accountant,
        "sample_rate": mechanism.sample_rate,
        "steps": mechanism.steps,
        "noise_multiplier": first.noise_multiplier,
        "clip_norm": mechanism.clip_norm,
        "delta": mechanism.delta,
        "claimed_epsilon": first.epsilon_spent,
        **tightest_epsilon(mechanism.sample_rate, first.noise_multiplier, mechanism.steps, mechanism.delta),
        "one_run_white_box": one_run,
        "one_run_black_box": one_run_black,
        "tight_white_box": tight,
        "gdp_white_box": gdp,  # an estimate: a bound only if the trade-off is Gaussian
        "headline_epsilon": headline,  # the largest valid column at the joint confidence
        "headline_confidence": settings.confidence,
        "headline_column_confidence": each,
        "split_seed": split_seed,
        **{f"{column}_power": reach for column, reach in power.items()},
        "canaries": settings.canaries,
        "canary_norm": settings.canary_norm,
        "guesses": guesses.guesses,
        "correct": guesses.correct,
        "black_box_canaries": settings.black_box_canaries,
        "black_box_correct": black_guesses.correct,
        "runs": len(runs),
        "trials": len(inside) + len(outside),
        "confidence": settings.confidence,
    }


# The tightest accountants the audit compares with (PRV's calibration costs a CPU minute;
# PLD is at least as tight as RDP and within PRV's error bound of it)
TIGHT_ACCOUNTANTS = ("rdp", "pld")


def tightest_epsilon(sample_rate: float, sigma: float, steps: int, delta: float) -> dict:
    """The smallest epsilon any of TIGHT_ACCOUNTANTS gives the mechanism, and which: the
    claim a paper states may be a loose RDP figure, against which a bug worth a little
    epsilon cannot show."""
    from dpvip.privacy.accounting import Mechanism, epsilon

    found = {name: epsilon([Mechanism(sample_rate, sigma, steps)], delta, name).epsilon for name in TIGHT_ACCOUNTANTS}
    name = min(found, key=found.get)
    return {"tightest_epsilon": found[name], "tightest_accountant": name}


GRID_DELTA = 1e-6


def audit_grid(epsilons: list[float], settings: AuditSettings) -> list[dict]:
    """The audit of one full-batch step (PRV, exact at q = 1) at each claimed epsilon."""
    return [
        audit_mechanism(AuditMechanism("mehta_head", "prv", 1.0, 1, float(epsilon), GRID_DELTA), settings)
        for epsilon in epsilons
    ]
