"""The sum of per-example clipped gradients of a whole model, in one forward and one
backward pass.

Every layer that owns trainable parameters is watched during the forward pass: its input
(activations) and its output's gradient edge are kept (not the output tensor, which is
freed as usual). One backward pass then asks autograd for the gradient of the summed
per-example losses with respect to those outputs only (backprops), so autograd never forms
the unclipped parameter gradient. A hook on each output works out the layer's per-example
norms as its backprops arrive, while they are still in cache; the clipped sums follow the
pass, once every norm is known. From activations and backprops, per layer:

- Linear layers (most of a ViT's parameters), with T tokens, `in` inputs and `out` outputs:
  when T (in + out) < in * out, each example's squared weight-gradient norm ||G_i^T A_i||^2
  is computed as <A_i A_i^T, G_i G_i^T> (the "ghost norm", T^2 (in + out) operations instead
  of T in out; about half of that, as both Grams are symmetric: `ghost_squared_norms`, or on
  a GPU with 16-bit operands one fused kernel, `fused_ghost`) and the
  clipped sum is one matmul, (c * G)^T A, as in Bu et al.'s book-keeping clipping. Otherwise
  the per-example gradients are formed, which then costs no more memory than the activations
  and backprops they replace, and the clipped sum is their weighted sum.
- Other layers (LayerNorm, GroupNorm, Conv2d: the ViT patch embedding, DP-RandP's GroupNorm
  WRN-16-4): per-example gradients from opacus' grad samplers, their norms, and a weighted
  sum. Every layer type opacus has a grad sampler for is accepted this way.

Augmentation multiplicity (`views=K`, De et al. 2022, used by DP-RandP Phases II/III): the
loss rows are K augmented views per example, example-major (rows iK ... iK + K - 1 are
example i), and an example's gradient is the MEAN of its K views' gradients, clipped as one.
The loss sum is divided by K before the backward pass, so backprops are already averaged;
a Linear layer then treats an example's K views as K times the tokens (G_i^T A_i sums over
them), and the sampled layers sum their K per-row gradients.

The clip is flat over the whole model: c_i = min(1, C / (||g_i|| + 1e-6)), opacus' factor, in
float32. Where the products run in reduced precision (under bf16/fp16 autocast, a 16-bit
model, or float32 matrix products in TF32 / bf16), the layers' operands stay in the dtype the
layer computed in (the Grams and clipped sums run on tensor cores, accumulating in float32)
and c_i = min(1, C / bound_i) with a proven bound on what rounding can add
(`dpvip.privacy.rounding`): every example's share of the summed gradient has norm at most C
as the rounded operands give it.
A per-example loss must depend on its own example only (no batch statistics), as in MAE.
Each parameter must belong to one layer and be used by calling that layer, once per forward.
Refused, each with a one-line `DpvipInputError` naming the layer by its name in the model
(docs/privacy.md has the table of what is supported):
- any BatchNorm (`_BatchNorm`: BatchNorm1d/2d/3d, SyncBatchNorm, lazy ones), with or without
  affine parameters, trainable or frozen: in training it normalises each example by its
  batch's statistics, so an example's loss is not its own;
- a module owning trainable parameters that is neither a Linear nor of a type opacus has a
  grad sampler for (the exact type: a subclass, timm's LayerNorm say, may change the
  forward), including a model or container holding a bare nn.Parameter (a class token, a
  position embedding): freeze such parameters, or make them a layer's;
- a weight shared by two layers, a layer called twice in one forward pass;
- a watched layer's parameter used without calling the layer (F.linear(x, layer.weight)):
  checked in the autograd graph of a forward pass in which the layer did not run. (Used
  besides a call of its layer, it is not detected: its gradient from that use is not seen.)
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Callable

import torch
from opacus.grad_sample import GradSampleModule
from torch import nn

from dpvip.errors import DpvipInputError
from dpvip.privacy.layer_rules import (  # noqa: F401  (CLIP_EPSILON ... _patches: this module's public names)
    CLIP_EPSILON,
    FORMED_TOGETHER,
    GRAM_BLOCK_TOKENS,
    FormedParts,
    SIXTEEN_BIT,
    _Call,
    _Factors,
    _patches,
    _rules,
    clip_factors,
    float32_bmm,
    ghost_squared_norms,
    sixteen_bit_products_to_float32,
)
from dpvip.privacy.fused_ghost import summed_tiles
from dpvip.privacy.rounding import bound_terms, bounded_clip_factors, reduced_precision


def layer_label(name: str, layer: nn.Module) -> str:
    """How a message names a module: "layer 'layer1.0.bn1' (BatchNorm2d)", or the model itself."""
    return f"layer '{name}' ({type(layer).__name__})" if name else f"the model itself ({type(layer).__name__})"


def refuse_batch_norm(model: nn.Module) -> None:
    """Refuse any BatchNorm in `model`, with or without (trainable) affine parameters: in
    training it normalises each example by its batch's mean and variance, so an example's
    loss depends on the other examples and no per-example clip bounds its influence."""
    for name, layer in model.named_modules():
        if isinstance(layer, nn.modules.batchnorm._BatchNorm):
            raise DpvipInputError(
                f"{layer_label(name, layer)} is a BatchNorm: its batch statistics mix the examples of a batch, "
                "which per-example clipping (DP training) cannot have; use GroupNorm or LayerNorm"
            )


def _no_rule_hint(layer: nn.Module) -> str:
    base = next((kind for kind in GradSampleModule.GRAD_SAMPLERS if isinstance(layer, kind)), None)
    if base is not None:
        timm = " (timm models: create_model(..., norm_layer=nn.LayerNorm))" if base is nn.LayerNorm else ""
        return (
            f"it subclasses {base.__name__}, whose rule holds for {base.__name__}'s own forward only; "
            f"use torch's {base.__name__}{timm}"
        )
    return (
        "per-example gradients are known for Linear and opacus' grad-sampled layers (docs/privacy.md); "
        "freeze these parameters (requires_grad_(False)) or make each a supported layer's, called in the forward"
    )


class ClippedGradientSum:
    """Accumulates sum_i clip_C(grad l_i) of `model` over micro-batches into `self.sums`
    (fp32, one tensor per trainable parameter, in `self.params` order).

    With `views=K`, the losses of `add` have K rows per example (example-major) and grad l_i
    is the mean over its K rows (augmentation multiplicity)."""

    def __init__(self, model: nn.Module, clip_norm: float, views: int = 1):
        if not clip_norm > 0:
            raise DpvipInputError(f"clip norm {clip_norm} must be positive")
        if not (isinstance(views, int) and views >= 1):
            raise DpvipInputError(f"views per example must be a positive integer, not {views!r}")
        self.model, self.clip_norm, self.views = model, float(clip_norm), views
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.layers = self._watched_layers()
        self._calls: dict[nn.Module, _Call] = {}
        self._recording = False
        self._handles = [layer.register_forward_hook(self._keep) for layer in self.layers]
        # One float32 buffer, one view per parameter: `privatize_(self.flat, ...)` then
        # noises the sums where they are, without a model-sized copy per step.
        device = self.params[0].device if self.params else torch.device("cpu")
        self.flat = torch.zeros(sum(p.numel() for p in self.params), dtype=torch.float32, device=device)
        self.sums = [part.view_as(p) for part, p in zip(self.flat.split([p.numel() for p in self.params]), self.params)]
        self._sum_of = {param: total for param, total in zip(self.params, self.sums)}
        starts = itertools.accumulate((p.numel() for p in self.params), initial=0)
        self._offsets = dict(zip(map(id, self.params), starts))  # each parameter's start in `flat`
        self._places: dict[tuple, torch.Tensor] = {}  # formed parameters -> their indices in `flat`
        self._layer_rules = {layer: _rules(layer) for layer in self.layers}
        self._idle_checked: set[frozenset] = set()  # sets of layers not run whose parameters are checked unused
        self._sixteen_bit_params = any(p.dtype in SIXTEEN_BIT for p in self.params)
        self._bounded = False  # this micro-batch's products run in reduced precision
        self.examples = 0

    def _watched_layers(self) -> list[nn.Module]:
        """The layers owning trainable parameters, each parameter owned by exactly one of
        them (a per-layer norm cannot account for a weight shared by two layers); refuses
        any BatchNorm and a layer with no per-example gradient rule."""
        refuse_batch_norm(self.model)
        layers, owners = [], {}
        for name, layer in self.model.named_modules():
            own = {
                f"{name}.{key}" if name else key: p
                for key, p in layer.named_parameters(recurse=False)
                if p.requires_grad
            }
            if not own:
                continue
            if not isinstance(layer, nn.Linear) and type(layer) not in GradSampleModule.GRAD_SAMPLERS:
                raise DpvipInputError(
                    f"{layer_label(name, layer)} has no per-example gradient rule for its trainable parameters "
                    f"{', '.join(own)}: {_no_rule_hint(layer)}"
                )
            for key, param in own.items():
                if id(param) in owners:
                    raise DpvipInputError(
                        f"parameter '{key}' is shared with '{owners[id(param)]}'; "
                        "per-example clipping needs each parameter in one layer"
                    )
                owners[id(param)] = key
            layers.append(layer)
        return layers

    def _keep(self, layer: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        if not self._recording:
            return
        if layer in self._calls:
            raise DpvipInputError(
                f"layer {type(layer).__name__} ran twice in one forward pass; "
                "per-example clipping needs one call per layer"
            )
        # The output's gradient edge, not the output: the tensor itself is freed as usual.
        self._calls[layer] = _Call(inputs[0].detach(), torch.autograd.graph.get_gradient_edge(output), self.views)
        output.register_hook(functools.partial(self._arrived, layer))

    def _arrived(self, layer: nn.Module, backprops: torch.Tensor) -> None:
        """The layer's backprops, as the backward pass forms them: its norms are worked out
        now, while they are in cache (read once more for the clipped sum, not twice), and
        what only the norms need is freed before the backward pass goes on."""
        call = self._calls.get(layer)
        if call is None or call.output is None:  # not a backward pass of `add`
            return
        call.output, call.backprops = None, backprops
        call.bounded = self._bounded or backprops.dtype in SIXTEEN_BIT
        # The rules choose their own precision (float32 accumulation, float64 norm sums where
        # bounded): autocast must not recast their products. (A GPU's backward pass runs on
        # autograd's device thread, where autocast is off: no context to enter, per layer.)
        device = backprops.device.type
        with torch.autocast(device, enabled=False) if torch.is_autocast_enabled(device) else contextlib.nullcontext():
            # (where bounded, formed parts give no norm here: `FormedParts` takes them together)
            call.squared = [part for part in self._layer_rules[layer][0](layer, call) if part is not None]
        call.activations = call.backprops = None  # `parts` keeps what the sum needs

    def add(self, per_example_losses: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Run `per_example_losses()` (a forward pass returning one loss per example), add the
        clipped gradients of its examples to the sums; returns (losses, unclipped norms).
        With `views=K` the losses are K rows per example and the norms one per example."""
        if not callable(per_example_losses):
            raise DpvipInputError(
                f"a micro-batch is a callable that runs the forward pass and returns one loss per example "
                f"(lambda: F.cross_entropy(model(x), y, reduction='none')), not a {type(per_example_losses).__name__}: "
                "the clipper watches the forward pass it runs"
            )
        self._calls.clear()
        device = self.flat.device.type
        self._bounded = (
            self._sixteen_bit_params or torch.is_autocast_enabled(device) or reduced_precision(torch.float32, device)
        )
        self._recording = True
        try:
            losses = per_example_losses()
        finally:
            self._recording = False
        if not isinstance(losses, torch.Tensor) or losses.dim() == 0:
            shape = "a single value" if isinstance(losses, torch.Tensor) else f"a {type(losses).__name__}"
            raise DpvipInputError(
                f"losses must have one value per example (a tensor of shape (examples,)), not {shape}: "
                "use reduction='none' (a mean-reduced loss mixes the examples before they can be clipped)"
            )
        try:
            self._check_unseen_uses(losses)
            norms = self._backward(losses)
        finally:
            self._calls.clear()
        self.examples += norms.shape[0]  # one norm per example
        return losses.detach(), norms

    def _backward(self, losses: torch.Tensor) -> torch.Tensor:
        """One backward pass to the watched layers' outputs (`_arrived` works out each
        layer's norms on the way), then the clip factors and the clipped sums."""
        if losses.shape[0] % self.views:
            raise DpvipInputError(f"{losses.shape[0]} loss rows are not {self.views} views per example")
        examples = losses.shape[0] // self.views
        if losses.numel() == 0:
            return losses.detach().float()
        calls = list(self._calls.items())
        # Dividing by K makes every backprop, hence every per-example gradient, a mean over views.
        total = losses.sum() if self.views == 1 else losses.sum() / self.views
        # The backprops are dropped as soon as they are returned: `parts` holds what the sums need.
        torch.autograd.grad(total, [call.output for _, call in calls], allow_unused=True)
        # A layer the loss did not use has no backprops and contributes nothing.
        for layer, call in calls:
            rows = [tuple(part.shape) for part in call.squared] + [(tiles.shape[0],) for tiles, _, _ in call.fused]
            rows += [(part[1].shape[0],) for part in call.parts.values() if call.bounded and part[0] == "formed"]
            self._check_rows(layer, rows, examples)
        squared = [part for _, call in calls for part in call.squared]  # in forward order, as before
        formed = self._formed_parts(calls)
        if not squared and formed is None and not any(call.fused for _, call in calls):
            norms = torch.zeros(examples, device=losses.device)
            factors = clip_factors(norms, self.clip_norm)
        elif any(call.bounded for _, call in calls):
            norms, factors = self._bounded_factors(calls, squared, formed)
        else:  # a ghost norm of cancelling tokens can round below zero
            norms = torch.stack(squared).sum(0).clamp_(min=0).sqrt()
            factors = clip_factors(norms, self.clip_norm)
        clip = _Factors(factors)
        with torch.autocast(losses.device.type, enabled=False):
            if formed is not None:
                formed.add_clipped_sums(self.flat, factors)
            for layer, call in calls:
                if call.parts:
                    self._layer_rules[layer][1](layer, call, clip, self._sum_of)
                call.parts = {}
        return norms

    def _formed_parts(self, calls: list) -> FormedParts | None:
        """The bounded layers' formed parts (None if there are none): the small ones taken
        out of their calls' `parts` into one buffer, the large ones left for their rules
        (`FormedParts`); unbounded layers keep theirs, with their norms."""
        small, large = [], []
        for layer, call in calls:
            if not call.bounded:
                continue
            for key in [key for key, part in call.parts.items() if part[0] == "formed"]:
                grad = call.parts[key][1]
                if grad[0].numel() > FORMED_TOGETHER:
                    large.append(grad)
                    continue
                # Linear rules key their parts by attribute name, opacus' samplers by parameter
                param = key if isinstance(key, torch.Tensor) else getattr(layer, key)
                small.append((param, call.parts.pop(key)[1]))
        if not small and not large:
            return None
        key = tuple(id(param) for param, _ in small)
        if small and key not in self._places:
            places = [torch.arange(self._offsets[id(p)], self._offsets[id(p)] + p.numel()) for p, _ in small]
            self._places[key] = torch.cat(places).to(self.flat.device)
        return FormedParts(small, self._places.get(key), large)

    def _bounded_factors(
        self, calls: list, squared: list, formed: FormedParts | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(norms, clip factors) where products ran in reduced precision: the factors bound
        each example's share by C whatever the rounding (`dpvip.privacy.rounding`).
        `squared`: the ghost parts' squared norms; `formed`: the formed parts; the fused ghost
        norms' tiles are in the calls (`_Call.fused`)."""
        # one stack and one sum each: a few launches whatever the number of layers
        totals = [torch.stack(squared).double().sum(0)] if squared else []
        ghosts = [bound for _, call in calls for bound in call.ghost_bounds]
        fused = [part for _, call in calls for part in call.fused]
        if fused:
            fused_squares, norm_sums = summed_tiles([tiles for tiles, _, _ in fused])
            totals.append(fused_squares)
            ghosts += [(norm_sum, e, r) for norm_sum, (_, e, r) in zip(norm_sums, fused)]
        formed_squares = formed.squared_norms() if formed is not None else None
        if formed_squares is not None:
            totals.append(formed_squares)
        total = functools.reduce(torch.add, totals).clamp(min=0)
        errors, roundings = bound_terms(ghosts, formed_squares, total)
        return total.sqrt().float(), bounded_clip_factors(total, errors, roundings, self.clip_norm)

    def _check_unseen_uses(self, losses: torch.Tensor) -> None:
        """Refuse a watched layer's parameter that the losses depend on although the layer
        did not run (F.linear(x, layer.weight)): the hooks never see that use, so its
        per-example gradient would be missing from the norms. The autograd graph is walked
        only when some watched layer did not run, once per such set of layers."""
        idle = frozenset(layer for layer in self.layers if layer not in self._calls)
        if not idle or idle in self._idle_checked or losses.grad_fn is None:
            return
        used, seen, stack = set(), set(), [losses.grad_fn]
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            variable = getattr(node, "variable", None)  # an AccumulateGrad node: a leaf tensor
            if variable is not None:
                used.add(id(variable))
            stack.extend(next_node for next_node, _ in node.next_functions)
        for name, layer in self.model.named_modules():
            if layer not in idle:
                continue
            for key, param in layer.named_parameters(recurse=False):
                if param.requires_grad and id(param) in used:
                    raise DpvipInputError(
                        f"parameter '{name}.{key}' of {layer_label(name, layer)} is used without calling the layer "
                        "(F.linear(x, layer.weight)?): its per-example gradient would not be seen; call the layer"
                    )
        self._idle_checked.add(idle)

    def _check_rows(self, layer: nn.Module, rows: list, examples: int) -> None:
        """One norm per example (`rows`: the shapes of the layer's per-example norms, or of
        their first dimension): a layer fed its batch in another shape (tokens flattened into
        rows, (B * L, d)) would be clipped per row, each example counted several times and
        its whole gradient never bounded by C."""
        for shape in rows:
            if shape != (examples,):
                name = next(name for name, module in self.model.named_modules() if module is layer)
                raise DpvipInputError(
                    f"{layer_label(name, layer)} gives {shape[0] if shape else 1} "
                    f"per-example norms for {examples} examples: its input is not batch-first (flattened "
                    "tokens?), so it cannot be clipped per example"
                )

    def reset(self) -> None:
        self.flat.zero_()
        self.examples = 0

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
