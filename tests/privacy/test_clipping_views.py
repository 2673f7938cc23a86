"""Augmentation multiplicity in ClippedGradientSum (`views=K`, DP-RandP Phases II/III): an
example's gradient is the mean over its K augmented views, clipped once; checked against a
one-example-at-a-time loop."""

import pytest
import torch
from torch import nn

from dpvip.errors import DpvipInputError
from dpvip.privacy.clipping import CLIP_EPSILON, ClippedGradientSum

pytestmark = pytest.mark.usefixtures("torch_one_thread")

EXAMPLES = 5


class Mixed(nn.Module):
    """Conv2d -> GroupNorm -> tokens -> Linear(8, 8) -> LayerNorm -> token mean -> Linear(8, 6)
    -> Linear(6, 1): every rule of the engine. With K = 3 views on 1 x 1 images, `tokens` and
    `wide` take the ghost path (3 * 16 < 64, 3 * 14 < 48) and `narrow` the formed one
    (3 * 7 >= 6); on 4 x 4 images `tokens` is formed (48 * 16 >= 64)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 8, 3, padding=1)
        self.group_norm = nn.GroupNorm(4, 8)
        self.tokens = nn.Linear(8, 8)
        self.layer_norm = nn.LayerNorm(8)
        self.wide = nn.Linear(8, 6)
        self.narrow = nn.Linear(6, 1)
        with torch.no_grad():
            for norm in (self.group_norm, self.layer_norm):
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        h = torch.tanh(self.group_norm(self.conv(x))).flatten(2).transpose(1, 2)
        h = self.layer_norm(self.tokens(h)).mean(1)
        return (self.narrow(torch.tanh(self.wide(h))).squeeze(-1) - 1).pow(2)


def mixed_model():
    torch.manual_seed(0)
    return Mixed().double()


def views_of(examples, views, size, seed=1):
    """(examples * views, 2, size, size), example-major: rows iK .. iK + K - 1 are example i."""
    return torch.randn(
        examples * views, 2, size, size, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)
    )


def naive_mean_view_clipped_sum(model, x, views, clip_norm):
    """Example by example: the gradient of the mean loss over its views, flat norm, clip."""
    params = list(model.parameters())
    sums = [torch.zeros_like(p) for p in params]
    norms = []
    for rows in x.split(views):
        grads = torch.autograd.grad(model(rows).mean(), params)
        norm = torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))
        factor = min(1.0, clip_norm / (norm.item() + CLIP_EPSILON))
        for total, grad in zip(sums, grads):
            total.add_(grad, alpha=factor)
        norms.append(norm)
    return sums, torch.stack(norms)


@pytest.mark.parametrize("size, tokens_path", [(1, "ghost"), (4, "formed")])
def test_mean_over_views_then_clip_equals_naive_loop(size, tokens_path, linear_paths):
    model, views = mixed_model(), 3
    x = views_of(EXAMPLES, views, size)
    _, norms = naive_mean_view_clipped_sum(model, x, views, 1.0)
    clip_norm = float(norms.median())
    want, norms = naive_mean_view_clipped_sum(model, x, views, clip_norm)
    assert (norms > clip_norm * 1.001).any() and (norms < clip_norm).any()

    summer = ClippedGradientSum(model, clip_norm, views=views)
    losses, got_norms = summer.add(lambda: model(x))

    assert losses.shape == (EXAMPLES * views,) and got_norms.shape == (EXAMPLES,)
    assert summer.examples == EXAMPLES
    torch.testing.assert_close(got_norms.double(), norms, rtol=1e-6, atol=0)
    for got, ref in zip(summer.sums, want):
        assert (got.double() - ref).abs().max() <= 1e-5 * ref.abs().max() + 1e-12
    paths = {name: linear_paths[getattr(model, name)] for name in ("tokens", "wide", "narrow")}
    assert paths == {"tokens": tokens_path, "wide": "ghost", "narrow": "formed"}


def test_clipping_the_mean_differs_from_averaging_clipped_views():
    """The point of the rule: K views are one example, clipped once (not K examples)."""
    model, views = mixed_model(), 4
    x = views_of(2, views, 4)
    mean_first = ClippedGradientSum(model, 1e-3, views=views)
    mean_first.add(lambda: model(x))
    per_view = ClippedGradientSum(model, 1e-3)
    per_view.add(lambda: model(x))
    norm = torch.sqrt(sum(s.double().pow(2).sum() for s in mean_first.sums))
    assert norm <= 2 * 1e-3 * (1 + 1e-5)  # two examples, each clipped to C
    assert not all(torch.allclose(a, b / views) for a, b in zip(mean_first.sums, per_view.sums))


def test_identical_views_give_the_single_view_result():
    model, views = mixed_model(), 3
    x = views_of(EXAMPLES, 1, 4)
    once = ClippedGradientSum(model, 0.05)
    _, once_norms = once.add(lambda: model(x))
    repeated = ClippedGradientSum(model, 0.05, views=views)
    _, repeated_norms = repeated.add(lambda: model(x.repeat_interleave(views, 0)))
    torch.testing.assert_close(repeated_norms, once_norms)
    for a, b in zip(repeated.sums, once.sums):
        torch.testing.assert_close(a, b)


def test_rows_must_be_whole_examples_and_views_positive():
    model = mixed_model()
    summer = ClippedGradientSum(model, 1.0, views=3)
    with pytest.raises(DpvipInputError, match="3 views per example"):
        summer.add(lambda: model(views_of(2, 2, 1)))
    for views in (0, 2.0):
        with pytest.raises(DpvipInputError, match="views per example"):
            ClippedGradientSum(model, 1.0, views=views)
