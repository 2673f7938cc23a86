"""The methods `dpvip bench dp-step` compares, each a full optimizer step (AdamW on every
trainable parameter) on its own copy of one model, batch and mask noise (`BenchSetup`):
- `nonprivate`: the summed per-example loss, one backward, AdamW.
- `ours`: the library's own `DPStep` (the step every DP path of dpvip takes): the ledger's
  charge, `ClippedGradientSum` over the micro-batches (one forward, one backward to the
  layer outputs, ghost norms or per-example gradients per layer), the noise, AdamW. Its
  ledger is a fixed-sigma one at sample rate 1 (the batch is the whole "dataset"), so the
  noise and the division by the batch are those of the other DP methods.
- `vmap`: per-example gradients of the whole model by `torch.func.vmap(grad(...))` over
  `functional_call` (the ViP authors' method; the buffers, the fixed position embeddings,
  passed as non-trainable), flat L2 clip, sum, the same noise and step.
- `opacus_hooks`: opacus' `GradSampleModule` in hooks mode (every trainable layer has an
  opacus grad sampler; a layer that would fall back to functorch is refused), clipping
  done by hand on `p.grad_sample`, the same noise and step.
- `opacus_ghost`: opacus' ghost clipping as documented: `GradSampleModuleFastGradientClipping`
  + `DPOptimizerFastGradientClipping`, with `DPTensorFastGradientClipping` wrapping our
  per-example loss vector (`DPLossFastGradientClipping` wants a criterion computing the
  loss from (output, target); the MAE computes its own per-example loss, so the tensor it
  would produce is built directly). Two backward passes; opacus adds the noise.

The DP methods clip at C = 0.1 with noise multiplier 0.5 and divide by the batch size
(the expected batch size of a Poisson batch of that mean). With `micro_batch`, every method
splits the batch the same way: the DP methods accumulate clipped sums (opacus ghost as its
BatchMemoryManager does: skipped optimizer steps), the non-private step accumulates
gradients, as a non-private run at that batch and memory would. The noise is drawn once per
step, whatever the number of micro-batches: a per-step cost that a step of few examples
cannot amortise (`dpvip bench dp-step --preset`: the shapes a paper run steps at).
With `precision: bf16` every method's forward passes run under bfloat16 autocast, as
DP-MAE's training does on a GPU; the clipped sums, the noise and the optimizer stay fp32.
Also here: `make_method(s)`, and `max_relative_difference` for comparing clipped sums.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass

import torch
from torch import nn

from dpvip.errors import DpvipInputError
from dpvip.models import MAESettings, mae_variant
from dpvip.models.mae import MaskedAutoencoder
from dpvip.privacy.clipping import ClippedGradientSum, clip_factors
from dpvip.privacy.ledger import PrivacyLedger
from dpvip.privacy.noise import noise_stream, privatize
from dpvip.privacy.optimizers import set_gradients
from dpvip.privacy.randomness import RunRandomness
from dpvip.privacy.step import DPStep

METHODS = ("nonprivate", "ours", "vmap", "opacus_hooks", "opacus_ghost")
NOISE_MULTIPLIER = 0.5
CLIP_NORM = 0.1
LEARNING_RATE = 1.0e-4
PRECISIONS = ("fp32", "bf16")
# Known and harmless here: opacus' full backward hooks on layers whose inputs need no
# gradient (the token indicators, the images), and vmap looping over the attention kernel
# (no batching rule for CPU flash attention; part of what the vmap method costs).
EXPECTED_WARNINGS = (
    "Full backward hook is firing",
    "There is a performance drop because we have not yet implemented the batching rule",
)


@dataclass(frozen=True)
class BenchSetup:
    """One model and one batch: what every method steps on."""

    model: str = "micro"
    image_size: int = 32
    patch_size: int = 4
    batch: int = 64
    micro_batch: int | None = None  # None: the DP methods take the batch in one pass
    device: str = "cpu"
    seed: int = 0
    precision: str = "fp32"  # or bf16: forward passes under bfloat16 autocast

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(torch.device(self.device).type, dtype=torch.bfloat16)

    def settings(self) -> MAESettings:
        size, decoder_depth = mae_variant(self.model)
        settings = MAESettings(
            size, image_size=self.image_size, patch_size=self.patch_size, decoder_depth=decoder_depth
        )
        settings.check()
        if self.batch < 1 or (self.micro_batch is not None and self.micro_batch < 1):
            raise DpvipInputError(f"batch {self.batch} and micro-batch {self.micro_batch} must be positive")
        if self.precision not in PRECISIONS:
            raise DpvipInputError(f"precision '{self.precision}' is not one of {', '.join(PRECISIONS)}")
        return settings

    def build(self) -> tuple[MaskedAutoencoder, torch.Tensor, torch.Tensor]:
        """(model, images, mask noise), the same for every call with the same setup."""
        settings = self.settings()
        torch.manual_seed(self.seed)
        model = MaskedAutoencoder(settings).to(self.device)
        generator = torch.Generator().manual_seed(self.seed + 1)
        images = torch.rand(self.batch, 3, self.image_size, self.image_size, generator=generator)
        noise = model.mask_noise(self.batch, generator)
        return model, images.to(self.device), noise.to(self.device)


def trainable(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def _flat_clipped_sum(per_example: list[torch.Tensor], clip_norm: float) -> list[torch.Tensor]:
    """sum_i min(1, C / (||g_i|| + 1e-6)) g_i with the norm over all parameters."""
    norms = torch.stack([g.flatten(1).float().pow(2).sum(1) for g in per_example]).sum(0).sqrt()
    factors = clip_factors(norms, clip_norm)
    return [torch.tensordot(factors, g.float(), dims=1) for g in per_example]


def _refuse_functorch_fallback(module, model: nn.Module) -> None:
    """opacus times its hooks here, never its functorch fallback: a layer without a grad
    sampler would make the comparison one of another method."""
    layers = module.iterate_submodules(model)
    fallback = [type(layer).__name__ for layer in layers if type(layer) not in module.GRAD_SAMPLERS]
    if fallback:
        raise RuntimeError(f"opacus would use functorch, not hooks, for {', '.join(fallback)}")


class Method:
    """A full training step on its own copy of the model (methods attach hooks to theirs)."""

    name = ""
    private = True

    def __init__(self, model: MaskedAutoencoder, setup: BenchSetup):
        self.model, self.setup = model, setup
        self.params = trainable(model)
        self.optimizer = torch.optim.AdamW(self.params, lr=LEARNING_RATE)
        self.steps = 0

    def chunks(self, images: torch.Tensor, noise: torch.Tensor):
        size = self.setup.micro_batch or len(images)
        return list(zip(images.split(size), noise.split(size)))

    def clipped_sum(self, images: torch.Tensor, noise: torch.Tensor) -> list[torch.Tensor]:
        """sum_i clip_C(grad l_i) over the examples, fp32, in `self.params` order (no noise,
        no step, no state left behind); the DP methods define it, the non-private step does not clip."""
        raise TypeError(f"method '{self.name}' does not clip per example")

    def batch_clipped_sum(self, images: torch.Tensor, noise: torch.Tensor) -> list[torch.Tensor]:
        """`clipped_sum` of the whole batch, taken micro-batch by micro-batch as the step
        takes it (the memory of one pass, whatever the batch)."""
        sums = [torch.zeros_like(p, dtype=torch.float32) for p in self.params]
        for x, n in self.chunks(images, noise):
            for total, part in zip(sums, self.clipped_sum(x, n)):
                total += part
        return sums

    def step(self, images: torch.Tensor, noise: torch.Tensor) -> None:
        self._noisy_step(self.batch_clipped_sum(images, noise), len(images))

    def _noisy_step(self, sums: list[torch.Tensor], batch: int) -> None:
        """Noise (as `DPStep` draws it), set the gradients, step."""
        # a benchmark releases nothing: its noise may come from a published seed
        stream = noise_stream(RunRandomness.seeded(self.setup.seed), self.steps, torch.device(self.setup.device))
        sums = privatize(sums, NOISE_MULTIPLIER, CLIP_NORM, batch, stream)
        set_gradients(self.params, sums)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.steps += 1


class NonPrivate(Method):
    name, private = "nonprivate", False

    def step(self, images, noise):
        self.optimizer.zero_grad(set_to_none=True)
        for x, n in self.chunks(images, noise):  # gradients accumulate over micro-batches
            with self.setup.autocast():
                loss = self.model(x, n).loss.sum()
            loss.backward()
        self.optimizer.step()
        self.steps += 1


class Ours(Method):
    name = "ours"

    def __init__(self, model, setup):
        super().__init__(model, setup)
        self.clipper = ClippedGradientSum(model, CLIP_NORM)
        # Sample rate 1 and sigma given: the step's noise and division are the other methods'.
        # Nothing is released, so the published-seed randomness and an unbounded budget do.
        ledger = PrivacyLedger("rdp", 1.0, NOISE_MULTIPLIER, CLIP_NORM, 0.0, float("inf"), 2**62)
        randomness = RunRandomness.seeded(setup.seed)
        self.dp_step = DPStep(self.clipper, self.optimizer, ledger, setup.batch, randomness, autocast=setup.autocast)

    def clipped_sum(self, images, noise):
        self.clipper.reset()
        with self.setup.autocast():
            self.clipper.add(lambda: self.model(images, noise).loss)
        sums = [total.clone() for total in self.clipper.sums]
        self.clipper.reset()
        return sums

    def step(self, images, noise):
        passes = [lambda x=x, n=n: self.model(x, n).loss for x, n in self.chunks(images, noise)]
        self.dp_step(self.steps, passes)
        self.steps += 1


class Vmap(Method):
    name = "vmap"

    def __init__(self, model, setup):
        super().__init__(model, setup)
        from torch.func import functional_call, grad, vmap

        # Detached views of the parameters: they follow the optimizer's in-place updates.
        self.names = [name for name, p in model.named_parameters() if p.requires_grad]
        self.weights = {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}
        buffers = {name: b for name, b in model.named_buffers()}

        def example_loss(weights, image, noise):
            with setup.autocast():
                outputs = functional_call(model, (weights, buffers), (image.unsqueeze(0), noise.unsqueeze(0)))
            return outputs.loss.sum()

        # The mask noise is an input, so every example keeps its own row: no randomness inside.
        self.per_example = vmap(grad(example_loss), in_dims=(None, 0, 0))

    def clipped_sum(self, images, noise):
        grads = self.per_example(self.weights, images, noise)
        return _flat_clipped_sum([grads[name] for name in self.names], CLIP_NORM)


class OpacusHooks(Method):
    name = "opacus_hooks"

    def __init__(self, model, setup):
        super().__init__(model, setup)
        from opacus.grad_sample import GradSampleModule

        self.module = GradSampleModule(model, batch_first=True, loss_reduction="sum", force_functorch=False)
        _refuse_functorch_fallback(self.module, model)

    def clipped_sum(self, images, noise):
        with self.setup.autocast():
            loss = self.module(images, noise).loss.sum()
        loss.backward()  # also forms p.grad, as opacus does
        sums = _flat_clipped_sum([p.grad_sample for p in self.params], CLIP_NORM)
        for p in self.params:
            p.grad_sample = None
            p.grad = None
        return sums


class OpacusGhost(Method):
    name = "opacus_ghost"

    def __init__(self, model, setup):
        super().__init__(model, setup)
        from opacus.grad_sample import GradSampleModuleFastGradientClipping
        from opacus.optimizers import DPOptimizerFastGradientClipping

        self.module = GradSampleModuleFastGradientClipping(
            model, batch_first=True, loss_reduction="mean", max_grad_norm=CLIP_NORM, use_ghost_clipping=True
        )
        _refuse_functorch_fallback(self.module, model)
        self.optimizer = DPOptimizerFastGradientClipping(
            self.optimizer,  # the AdamW of every method
            noise_multiplier=NOISE_MULTIPLIER,
            max_grad_norm=CLIP_NORM,
            expected_batch_size=setup.batch,
            loss_reduction="mean",
            generator=torch.Generator(device=setup.device).manual_seed(setup.seed),
        )

    def _backward(self, images, noise) -> None:
        """Both of opacus' backward passes; leaves the clipped sum in p.grad."""
        from opacus.utils.fast_gradient_clipping_utils import DPTensorFastGradientClipping

        with self.setup.autocast():
            losses = self.module(images, noise).loss
        DPTensorFastGradientClipping(self.module, self.optimizer, losses, "mean").backward()

    def clipped_sum(self, images, noise):
        self._backward(images, noise)
        sums = [p.grad.float().clone() for p in self.params]
        self.optimizer.zero_grad(set_to_none=True)
        return sums

    def step(self, images, noise):
        chunks = self.chunks(images, noise)
        for k, (x, n) in enumerate(chunks):
            self._backward(x, n)
            if k < len(chunks) - 1:  # accumulate into p.summed_grad, as BatchMemoryManager does
                self.optimizer.signal_skip_step(do_skip=True)
                self.optimizer.step()
        self.optimizer.step()  # noise N(0, (sigma C)^2), divided by the expected batch size
        self.optimizer.zero_grad(set_to_none=True)
        self.steps += 1


METHOD_CLASSES = {cls.name: cls for cls in (NonPrivate, Ours, Vmap, OpacusHooks, OpacusGhost)}


def make_method(name: str, model: MaskedAutoencoder, setup: BenchSetup) -> Method:
    if name not in METHOD_CLASSES:
        raise DpvipInputError(f"method '{name}' is not one of {', '.join(METHODS)}")
    return METHOD_CLASSES[name](model, setup)


def make_methods(names: list[str], setup: BenchSetup) -> tuple[dict[str, Method], torch.Tensor, torch.Tensor]:
    """Each method on its own copy of the same freshly initialised model."""
    model, images, noise = setup.build()
    return {name: make_method(name, copy.deepcopy(model), setup) for name in names}, images, noise


def max_relative_difference(sums: list[torch.Tensor], reference: list[torch.Tensor]) -> float:
    """Largest over parameters of max |sums - reference| / max |reference|."""
    worst = 0.0
    for got, want in zip(sums, reference, strict=True):
        scale = want.double().abs().max().item()
        error = (got.double() - want.double()).abs().max().item()
        worst = max(worst, error / scale if scale > 0 else error)
    return worst
