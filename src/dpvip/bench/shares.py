"""Parts of ours' step timed alone, so that `dpvip bench dp-step` can say how much of the step
each one is: the noise (`time_noise`, once a step) and the per-example norms
(`time_norms`, once a micro-batch). What is left of ours' step beyond them and the
non-private step's own work is the clipped sums' extra and the clipper's bookkeeping.

Both run in the parent process after the timed processes are gone (it computes then).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from unittest import mock

import torch

from dpvip.bench.methods import CLIP_NORM, NOISE_MULTIPLIER, BenchSetup, make_methods, trainable
from dpvip.bench.timing import _synchronise
from dpvip.privacy.layer_rules import _Call
from dpvip.privacy.noise import add_gaussian_noise_, noise_stream
from dpvip.privacy.randomness import RunRandomness


def time_noise(setup: BenchSetup, rounds: int) -> dict:
    """The step's noise alone: N(0, (sigma C)^2) on every trainable parameter, drawn as the DP
    step draws it."""
    model, _, _ = setup.build()
    flat = torch.zeros(sum(p.numel() for p in trainable(model)), device=setup.device)
    del model
    seconds = []
    for step in range(rounds):
        stream = noise_stream(RunRandomness.seeded(setup.seed), step, flat.device)
        began = time.perf_counter()
        add_gaussian_noise_(flat, NOISE_MULTIPLIER * CLIP_NORM, stream)
        _synchronise(setup.device)
        seconds.append(time.perf_counter() - began)
    return {"parameters": flat.numel(), "seconds": statistics.median(seconds)}


@dataclass
class _NormCall:
    """What one watched layer's norm rule was given in a micro-batch's backward pass."""

    layer: torch.nn.Module
    rule: object
    activations: torch.Tensor
    backprops: torch.Tensor
    views: int
    bounded: bool

    def run(self) -> list:
        """The rule's squared norms per part (None for a bounded formed part: the clipper
        takes those together), on a fresh call. Called outside autocast, as the clipper's hook
        runs the rule (it turns autocast off)."""
        return self.rule(self.layer, _Call(self.activations, None, self.views, self.backprops, bounded=self.bounded))


def recorded_norm_calls(setup: BenchSetup) -> tuple[list[_NormCall], torch.Tensor, int]:
    """(the norm rules' calls of ours' first micro-batch, the per-example norms ours' clipper
    returned for it, the micro-batches of a step)."""
    methods, images, noise = make_methods(["ours"], setup)
    ours = methods["ours"]
    clipper, chunks = ours.clipper, ours.chunks(images, noise)
    recorded = []

    def recording(layer_rule):
        def rule(layer, call):
            recorded.append(_NormCall(layer, layer_rule, call.activations, call.backprops, call.views, call.bounded))
            return layer_rule(layer, call)

        return rule

    rules = {layer: (recording(norms), add) for layer, (norms, add) in clipper._layer_rules.items()}
    x, mask_noise = chunks[0]
    with mock.patch.dict(clipper._layer_rules, rules), setup.autocast():
        _, norms = clipper.add(lambda: ours.model(x, mask_noise).loss)
    clipper.close()
    return recorded, norms, len(chunks)


def time_norms(setup: BenchSetup, rounds: int) -> dict:
    """The per-example norms alone (the clipper's per-layer norm rules: the ghost norms'
    Grams, formed per-example gradients and their squares, the clip bound's terms), on the
    layer inputs and backprops of ours' first micro-batch, times the micro-batches of a step.
    Where the products are bounded (bf16), the formed parts' squares are taken together after
    the pass (`FormedParts`), a few operations a micro-batch not counted here."""
    calls, _, micro_batches = recorded_norm_calls(setup)
    for call in calls:  # warm-up: on a GPU, the fused kernel times its tile shapes here
        call.run()
    seconds = []
    for _ in range(rounds):
        _synchronise(setup.device)
        began = time.perf_counter()
        for call in calls:
            call.run()
        _synchronise(setup.device)
        seconds.append(time.perf_counter() - began)
    return {"layers": len(calls), "micro_batches": micro_batches, "seconds": statistics.median(seconds) * micro_batches}
