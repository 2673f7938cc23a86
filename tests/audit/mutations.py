"""Bugs injected into the DP step, shared by the audit's tests (tests/privacy/test_canaries.py
at one full-batch step, tests/privacy/test_audit_mutations.py at the workflow's settings):
each is what a plausible broken implementation would do."""

from __future__ import annotations

import itertools
from dataclasses import replace

import torch

import dpvip.privacy.step as step_module
from dpvip.privacy.ledger import PrivacyLedger
from dpvip.privacy.noise import gaussian_noise, noise_stream, privatize_
from dpvip.privacy.step import DPStep


def halve_noise(monkeypatch) -> None:
    """The DP step adds noise of sigma C / 2."""
    monkeypatch.setattr(step_module, "privatize_", lambda flat, sigma, *a, **k: privatize_(flat, sigma / 2, *a, **k))


def leave_a_step_uncharged(monkeypatch) -> None:
    """The ledger counts no step: T - 1 charged for T taken (from the second step on, the
    ledger keeps its count)."""
    monkeypatch.setattr(PrivacyLedger, "charge", lambda self, steps=1: replace(self, steps_done=self.steps_done))


def unclipped_second_layer(clipper, *args, **kwargs) -> DPStep:
    """A `make_step` whose clipper neither counts the audit network's second layer in the
    per-example norm nor scales its gradients."""
    layer = clipper.model.layers[1]
    norms, add = clipper._layer_rules[layer]
    clipper._layer_rules[layer] = (
        lambda layer, call: norms(layer, call) and [],  # prepared for the sum, left out of the norm
        lambda layer, call, factors, sums: add(layer, call, type(factors)(torch.ones_like(factors.values)), sums),
    )
    return DPStep(clipper, *args, **kwargs)


def noise_on_every_rank(monkeypatch):
    """A `make_step` for several ranks, each adding its own noise of std sigma C / world before
    the summing all-reduce (as if the ranks' gradients were averaged), and none after: the sum
    carries sigma C / sqrt(world)."""
    monkeypatch.setattr(step_module, "privatize_", lambda flat, sigma, *a, **k: privatize_(flat, 0.0, *a, **k))

    def make_step(clipper, optimizer, ledger, examples, randomness, *, rank, world, all_reduce, **kwargs):
        std = ledger.noise_multiplier * ledger.clip_norm / world
        calls = itertools.count()  # a stream draws the same noise each time: one per rank and step

        def noisy_all_reduce(flat):
            own = noise_stream(randomness, world * next(calls) + rank, torch.device("cpu"), "rank noise")
            flat += gaussian_noise(flat.shape, std, own)
            all_reduce(flat)

        return DPStep(
            clipper,
            optimizer,
            ledger,
            examples,
            randomness,
            rank=rank,
            world=world,
            all_reduce=noisy_all_reduce,
            **kwargs,
        )

    return make_step
