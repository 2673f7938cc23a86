"""dpvip's DP training engine: DP-SGD/DP-AdamW steps with per-example clipping, Poisson
sampling and Gaussian noise drawn from a per-run secret, a privacy ledger that refuses a step
past the budget, and three accountants. It is the one engine every DP path of dpvip takes its
steps through, and it is meant for your own training loops too (examples/dp_training_loop.py).

The public API (importable from `dpvip.privacy`; each name loads its module on first use, so
`import dpvip.privacy` alone needs no torch):

- `PrivacyLedger` (`ledger`): a run's mechanism and budget. `PrivacyLedger.calibrate(
  accountant, sample_rate, steps, target_epsilon, delta, clip_norm)` finds sigma;
  `.epsilon_spent()`, `.record()` (for checkpoints), `.resumed(...)` (refuses another mechanism).
  `BudgetExceeded` is raised for a step past the planned ones.
- `RunRandomness` (`randomness`): where noise and batches come from. `RunRandomness.secret(
  work_dir)` keeps a 256-bit key in the key store (`use_key_store`, outside your results),
  `RunRandomness.fresh()` holds one in memory, `RunRandomness.seeded(seed)` is bit-identical
  and NOT private (tests). `release_key(work_dir)` deletes a finished run's key.
- `ClippedGradientSum(model, clip_norm)` (`clipping`): per-example clipped gradient sums in one
  forward and one backward pass per micro-batch (ghost norms for Linear layers, opacus' grad
  samplers for the rest); `.add(losses_of)` takes a closure returning per-example losses.
  It refuses, naming the layer, any BatchNorm and what it cannot clip (docs/privacy.md).
  Under bf16/fp16 autocast its products stay 16-bit (tensor cores, float32 accumulation) and
  its clip factor bounds what rounding can add (`rounding`: proven, tested against float64),
  so each example's share stays within C; in full float32 the factor is opacus' own.
- `DPStep(clipper, optimizer, ledger, examples, randomness)` (`step`): charges the ledger, draws
  the step's Poisson batch (`.batch(step)` or `.sampler`), adds the micro-batches' clipped
  sums, adds N(0, (sigma C)^2) once, divides by the expected batch and steps the optimizer;
  `dp_step(step, micro_batches)` returns a `StepReport`. `data=`: the private dataset's
  name, which the ledger records (with the key's name) so that every release on one dataset
  can be composed into a total epsilon.
- `PoissonBatches` (`sampling`): the keyed Poisson sampler, per step and rank, yielding
  [(index, seed)] batches; `IndexBatches(sampler, start_step)` yields the same batches as
  plain index lists: `DataLoader(dataset, batch_sampler=IndexBatches(dp_step.sampler))` takes
  any map-style `Dataset` (examples/own_loop_vision.py).
- `make_optimizer`, `set_gradients` (`optimizers`); `privatize`, `privatize_`, `noise_stream`
  (`noise`): the noise on its own (on CUDA one fused keyed Triton kernel, `cuda_noise`).
- Accounting (`accounting`): `Mechanism(sample_rate, noise_multiplier, steps)`, `epsilon(
  mechanisms, delta, accountant)`, `noise_multiplier(sample_rate, steps, target_epsilon,
  delta, accountant)`; `gaussian` for exact full-batch composition.
- Constants and checks, loaded eagerly (no torch): `ACCOUNTANTS`, `OPTIMIZERS`, `RANDOMNESS`,
  `run_options`, `check_randomness`, `refuse_large_delta`.

The engine imports nothing of dpvip above `dpvip.memo` and `dpvip.errors` (an import-linter
contract): the audits (`dpvip.audit`) and the benchmark (`dpvip.bench`) sit on top of it.
"""

import importlib

from dpvip.errors import DpvipInputError

# Names offered by the command line and checked in configs without importing torch.
ACCOUNTANTS = ("rdp", "prv", "pld")
OPTIMIZERS = ("adamw", "adam", "sgd", "lamb")
# Where a DP run's noise and batches come from (`randomness`): "seeded" is not private.
RANDOMNESS = ("secret", "seeded")


def run_options(privacy: dict | None) -> dict:
    """What every DP run takes from the config's `privacy` section: where its randomness
    comes from, and whether a delta of at least 1/n is allowed."""
    privacy = privacy or {}
    return {
        "randomness": privacy.get("randomness", "secret"),
        "allow_large_delta": bool(privacy.get("allow_large_delta", False)),
    }


def check_randomness(mode: str) -> None:
    """Refuse a `privacy.randomness` that is neither 'secret' nor 'seeded'."""
    if mode not in RANDOMNESS:
        raise DpvipInputError(f"privacy.randomness '{mode}' is not one of {', '.join(RANDOMNESS)}")


def refuse_large_delta(delta: float, examples: int, allowed: bool) -> None:
    """Refuse delta >= 1/n (n training examples) unless `privacy.allow_large_delta`."""
    if delta * examples >= 1 and not allowed:
        raise DpvipInputError(
            f"delta {delta:g} is at least 1/n for this run's n = {examples} examples (delta * n = "
            f"{delta * examples:.3g}): a guarantee that weak allows publishing an example outright; "
            "lower delta, or allow it to run anyway, flagged (DPStep(..., allow_large_delta=True); "
            "in the workflow, privacy.allow_large_delta: true)"
        )


# name -> the module of this package that defines it (loaded on first use: PEP 562)
_LAZY = {
    "PrivacyLedger": "ledger",
    "BudgetExceeded": "ledger",
    "RunRandomness": "randomness",
    "use_key_store": "randomness",
    "release_key": "randomness",
    "ClippedGradientSum": "clipping",
    "DPStep": "step",
    "StepReport": "step",
    "PoissonBatches": "sampling",
    "IndexBatches": "sampling",
    "make_optimizer": "optimizers",
    "set_gradients": "optimizers",
    "privatize": "noise",
    "privatize_": "noise",
    "noise_stream": "noise",
    "Mechanism": "accounting",
    "epsilon": "accounting",
    "noise_multiplier": "accounting",
}

__all__ = [
    "ACCOUNTANTS",
    "OPTIMIZERS",
    "RANDOMNESS",
    "run_options",
    "check_randomness",
    "refuse_large_delta",
    *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        # a string import: importing the package stays free of torch for the planning code
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
