"""ClippedGradientSum against a naive one-example-at-a-time loop (DESIGN: "the per-example
loss is exact ... checked against a naive one-example-at-a-time loop")."""

import pytest
import torch
from opacus.grad_sample import GradSampleModule
from torch import nn

from dpvip.errors import DpvipInputError
from dpvip.models import MAESettings
from dpvip.models.mae import MaskedAutoencoder
from dpvip.privacy.clipping import CLIP_EPSILON, GRAM_BLOCK_TOKENS, ClippedGradientSum, ghost_squared_norms
from dpvip.synthetic.family import thread_invariant

BATCH = 6


@pytest.fixture(autouse=True)
def single_thread():
    with thread_invariant(torch.device("cpu")):
        yield


def trainable(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def naive_clipped_sum(model: nn.Module, loss_of_example, count: int, clip_norm: float):
    """One example at a time: its gradient over all trainable parameters, flat L2 norm,
    factor min(1, C / (norm + 1e-6)); (clipped sums in float64, norms, factors)."""
    params = trainable(model)
    sums = [torch.zeros_like(p, dtype=torch.float64) for p in params]
    norms = []
    for i in range(count):
        grads = torch.autograd.grad(loss_of_example(i).sum(), params, allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]
        norm = torch.sqrt(sum(g.double().pow(2).sum() for g in grads))
        factor = torch.clamp(clip_norm / (norm + CLIP_EPSILON), max=1.0)
        for total, g in zip(sums, grads):
            total += factor * g.double()
        norms.append(norm)
    norms = torch.stack(norms)
    return sums, norms, torch.clamp(clip_norm / (norms + CLIP_EPSILON), max=1.0)


def assert_sums_close(ours, reference, rtol):
    """Per parameter: max |ours - reference| <= rtol * max |reference|."""
    assert len(ours) == len(reference)
    for k, (got, want) in enumerate(zip(ours, reference)):
        assert got.shape == want.shape
        scale = want.abs().max().item()
        error = (got.double() - want).abs().max().item()
        assert error <= rtol * scale + 1e-12, f"parameter {k} {tuple(want.shape)}: error {error:.3g}, scale {scale:.3g}"


# --- the micro MAE ------------------------------------------------------------------------


def micro_mae(dtype):
    torch.manual_seed(0)
    return MaskedAutoencoder(MAESettings("micro", image_size=32, patch_size=4)).to(dtype)


def mae_batch(model, dtype, batch=BATCH, seed=1):
    images = torch.rand(batch, 3, 32, 32, generator=torch.Generator().manual_seed(seed)).to(dtype)
    noise = model.mask_noise(batch, torch.Generator().manual_seed(seed + 1)).to(dtype)
    return images, noise


def mae_naive(model, images, noise, clip_norm):
    return naive_clipped_sum(model, lambda i: model(images[i : i + 1], noise[i : i + 1]).loss, len(images), clip_norm)


# float64: the model runs in double, the clipped sums are kept in fp32 (so 1e-5, not 1e-12).
# float32: per-example gradients in a batch and alone round differently (observed ~1e-6);
# 1e-4 leaves room for that while any clipping error (a wrong factor, a missing example or
# parameter) is of order 1.
@pytest.mark.parametrize("dtype, rtol", [(torch.float64, 1e-5), (torch.float32, 1e-4)])
def test_mae_clipped_sum_equals_naive_loop_when_some_examples_are_clipped(dtype, rtol, linear_paths):
    model = micro_mae(dtype)
    images, noise = mae_batch(model, dtype)
    _, norms, _ = mae_naive(model, images, noise, 1.0)
    ordered = norms.sort().values
    clip_norm = float(ordered[BATCH // 2 - 1] + ordered[BATCH // 2]) / 2  # between the middle norms
    reference, naive_norms, factors = mae_naive(model, images, noise, clip_norm)
    assert (factors < 0.999).any() and (factors == 1).any()  # both clipped and unclipped examples

    summer = ClippedGradientSum(model, clip_norm)
    losses, got_norms = summer.add(lambda: model(images, noise).loss)

    assert_sums_close(summer.sums, reference, rtol)
    torch.testing.assert_close(got_norms.double(), naive_norms, rtol=rtol, atol=0)
    assert all(total.dtype == torch.float32 for total in summer.sums)
    assert summer.examples == BATCH
    torch.testing.assert_close(losses, model(images, noise).loss.detach())  # the batch's losses, detached
    assert not losses.requires_grad
    # The MAE has Linear layers on both paths (encoder qkv: ghost; tokens, decoder: formed).
    assert set(linear_paths.values()) == {"ghost", "formed"}


def test_mae_clipped_sum_is_the_plain_gradient_sum_when_nothing_is_clipped():
    model = micro_mae(torch.float64)
    images, noise = mae_batch(model, torch.float64)
    plain = torch.autograd.grad(model(images, noise).loss.sum(), trainable(model))
    summer = ClippedGradientSum(model, 1e6)
    _, norms = summer.add(lambda: model(images, noise).loss)
    assert (norms < 1e6).all()
    assert_sums_close(summer.sums, [g.double() for g in plain], 1e-5)


@pytest.mark.parametrize("clip_norm", [1e6, "median", 0.01])
def test_bounded_path_takes_the_formed_parts_together_and_matches_the_naive_loop(monkeypatch, clip_norm, linear_paths):
    # Reduced precision forced with IEEE products (float32 operands): the bounded path, whose
    # formed parts (LayerNorms by opacus' samplers, biases, the formed Linear weights) are
    # taken together (`FormedParts`: one norm, one product, one indexed add). Each sum must
    # land in its own parameter's places. Measured: 3e-7 (nothing clipped) to 5e-6 of each
    # parameter's largest value (the bound's slack, every example clipped); a misplaced
    # column is of order 1.
    import dpvip.privacy.clipping as clipping

    monkeypatch.setattr(clipping, "reduced_precision", lambda dtype, device: True)
    columns = []

    class Spy(clipping.FormedParts):
        def __init__(self, small, places, large):
            super().__init__(small, places, large)
            columns.append((self.matrix.shape[1], len(large)))

    monkeypatch.setattr(clipping, "FormedParts", Spy)
    model = micro_mae(torch.float64)
    images, noise = mae_batch(model, torch.float64)
    if clip_norm == "median":
        clip_norm = float(mae_naive(model, images, noise, 1.0)[1].median())
    reference, naive_norms, _ = mae_naive(model, images, noise, clip_norm)
    summer = ClippedGradientSum(model, clip_norm)
    _, norms = summer.add(lambda: model(images, noise).loss)
    assert_sums_close(summer.sums, reference, 1e-4)
    torch.testing.assert_close(norms.double(), naive_norms, rtol=1e-5, atol=0)
    ghost = {layer.weight for layer, path in linear_paths.items() if path == "ghost"}
    formed = [p.numel() for p in trainable(model) if p not in ghost]
    small = [n for n in formed if n <= clipping.FORMED_TOGETHER]
    assert ghost and columns == [(sum(small), len(formed) - len(small))] and len(formed) > len(small) > 0


def test_small_clip_norm_gives_every_example_norm_c():
    # Every example clipped: the sum's norm is at most B * C, and each contributes C g/|g|.
    model = micro_mae(torch.float64)
    images, noise = mae_batch(model, torch.float64)
    reference, norms, factors = mae_naive(model, images, noise, 0.01)
    assert (factors < 0.01).all()
    summer = ClippedGradientSum(model, 0.01)
    summer.add(lambda: model(images, noise).loss)
    assert_sums_close(summer.sums, reference, 1e-5)
    total_norm = torch.sqrt(sum(s.double().pow(2).sum() for s in summer.sums))
    assert total_norm <= BATCH * 0.01 * (1 + 1e-5)


def test_micro_batches_accumulate_like_one_batch_and_reset_zeroes():
    model = micro_mae(torch.float32)
    images, noise = mae_batch(model, torch.float32, batch=7)
    clip_norm = 6.3  # inside the range of this batch's norms

    whole = ClippedGradientSum(model, clip_norm)
    _, whole_norms = whole.add(lambda: model(images, noise).loss)
    whole.close()
    assert (whole_norms > clip_norm).any() and (whole_norms < clip_norm).any()

    parts = ClippedGradientSum(model, clip_norm)
    _, first = parts.add(lambda: model(images[:3], noise[:3]).loss)
    assert parts.examples == 3
    _, second = parts.add(lambda: model(images[3:], noise[3:]).loss)
    assert parts.examples == 7
    torch.testing.assert_close(torch.cat([first, second]), whole_norms, rtol=1e-5, atol=0)
    assert_sums_close(parts.sums, [s.double() for s in whole.sums], 1e-5)

    parts.reset()
    assert parts.examples == 0
    assert all(not total.any() for total in parts.sums)
    _, again = parts.add(lambda: model(images[3:], noise[3:]).loss)  # still works after reset
    torch.testing.assert_close(again, second)


def test_no_parameter_gradient_is_formed():
    model = micro_mae(torch.float32)
    images, noise = mae_batch(model, torch.float32)
    summer = ClippedGradientSum(model, 1.0)
    summer.add(lambda: model(images, noise).loss)
    assert all(p.grad is None for p in model.parameters())
    assert any(total.any() for total in summer.sums)


def test_a_layers_norm_is_worked_out_as_its_backprops_arrive():
    # The last layer's norm comes before the backward pass has reached the layer under it
    # (its backprops still in cache), not after the whole pass; the result is unchanged.
    model = tiny()
    x = tiny_inputs(4, 4)
    events = []
    summer = ClippedGradientSum(model, 1.0)
    for name in ("narrow", "wide"):
        layer = getattr(model, name)
        norms_rule, sum_rule = summer._layer_rules[layer]
        summer._layer_rules[layer] = (
            lambda lay, call, name=name, rule=norms_rule: events.append(f"norm {name}") or rule(lay, call),
            sum_rule,
        )

    # Registered after the summer's: fires when the backward pass hands `wide` its backprops.
    def watch(layer, inputs, output):
        output.register_hook(lambda g: events.append("wide"))

    model.wide.register_forward_hook(watch)
    _, norms = summer.add(lambda: model(x))
    assert events == ["norm narrow", "norm wide", "wide"]
    _, reference, _ = naive_clipped_sum(model, lambda i: model(x[i : i + 1]), len(x), 1.0)
    torch.testing.assert_close(norms.double(), reference, rtol=1e-5, atol=0)


@pytest.mark.parametrize("tokens", [1, 50, GRAM_BLOCK_TOKENS + 33, 197, 260])
def test_ghost_norm_by_symmetric_blocks_is_the_per_example_gradient_norm(tokens):
    # ||G_i^T A_i||^2 formed outright; 97 tokens and more are cut into 2 to 4 blocks of Grams.
    generator = torch.Generator().manual_seed(tokens)
    a = torch.randn(4, tokens, 9, dtype=torch.float64, generator=generator)
    g = torch.randn(4, tokens, 6, dtype=torch.float64, generator=generator)
    want = torch.bmm(g.transpose(1, 2), a).pow(2).sum((1, 2))
    torch.testing.assert_close(ghost_squared_norms(a, g), want, rtol=1e-12, atol=0)


def test_the_in_place_16_bit_addmm_is_taken_only_where_torch_gets_it_right(monkeypatch):
    # On CUDA the clipped sum adds 16-bit products into the float32 sums by one addmm where
    # torch can; the probe tries a case with a known answer, so a torch that refuses the call
    # or ignores the float32 `self` (an older addmm) keeps the product and the add apart.
    from torch.utils._python_dispatch import TorchDispatchMode

    from dpvip.privacy import layer_rules

    cpu = torch.device("cpu")
    probe = layer_rules.adds_sixteen_bit_products_in_place
    assert not probe(cpu)  # no 16-bit products into float32 on CPU at all

    class Addmm(TorchDispatchMode):  # addmm.dtype_out as a torch might do it
        def __init__(self, behaviour):
            super().__init__()
            self.behaviour = behaviour

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is not torch.ops.aten.addmm.dtype_out:
                return func(*args, **(kwargs or {}))
            total, x, y, out = args[0], args[1].float(), args[2].float(), kwargs["out"]
            if self.behaviour == "refuses":
                raise RuntimeError("self and mat2 must have the same dtype")
            return torch.mm(x, y, out=out) if self.behaviour == "ignores self" else torch.addmm(total, x, y, out=out)

    monkeypatch.setattr(layer_rules, "sixteen_bit_products_to_float32", lambda device: True)
    try:
        for behaviour, taken in (("right", True), ("ignores self", False), ("refuses", False)):
            probe.cache_clear()
            with Addmm(behaviour):
                assert probe(cpu) is taken, behaviour
    finally:
        probe.cache_clear()


def test_grams_are_blocked_except_float32_on_cuda():
    # Measured on an H200: float32 Grams run fastest whole there; bf16 operands' float32
    # products stay in blocks (their kernel's time follows their size), as on CPU.
    from types import SimpleNamespace

    from dpvip.privacy.layer_rules import _gram_blocks

    def blocks(device, dtype):
        return _gram_blocks(SimpleNamespace(device=torch.device(device), dtype=dtype, shape=(8, 197, 512)))

    assert blocks("cuda", torch.float32) == 1
    assert blocks("cuda", torch.bfloat16) == blocks("cpu", torch.float32) == blocks("cpu", torch.bfloat16) == 3


def test_long_token_sequences_take_the_blocked_ghost_norm_and_match_the_naive_loop(linear_paths):
    # A 512 -> 512 Linear on 200 tokens: ghost (200 * 1024 < 512^2), its Grams in 3 blocks.
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(512, 512), nn.Tanh(), nn.Linear(512, 1)).double()
    inputs = torch.randn(3, 200, 512, dtype=torch.float64)

    def losses(x):
        return model(x).squeeze(-1).pow(2).mean(1)

    reference, norms, factors = naive_clipped_sum(model, lambda i: losses(inputs[i : i + 1]), 3, 0.05)
    assert (factors < 1).all()
    summer = ClippedGradientSum(model, 0.05)
    _, got_norms = summer.add(lambda: losses(inputs))
    assert linear_paths[model[0]] == "ghost" and round(200 / GRAM_BLOCK_TOKENS) == 3
    torch.testing.assert_close(got_norms.double(), norms, rtol=1e-6, atol=0)
    assert_sums_close(summer.sums, reference, 1e-5)


# --- a tiny model with every layer type and both Linear paths ----------------------------


class Tiny(nn.Module):
    """Conv2d -> tokens -> Linear(8, 8) on T tokens -> LayerNorm -> token mean -> Linear(8, 6)
    and Linear(6, 1) on 2-D inputs; a per-example loss.

    Linear paths (ghost iff T (in + out) < in * out): `tokens` is ghost for T = 2
    (32 < 64) and formed for T = 16 (256 >= 64); on 2-D inputs (T = 1) `wide` is ghost
    (14 < 48) and `narrow` formed (7 >= 6)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 8, 3, padding=1)
        self.tokens = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.wide = nn.Linear(8, 6)
        self.narrow = nn.Linear(6, 1)

    def forward(self, x):
        h = self.conv(x).flatten(2).transpose(1, 2)  # (B, H*W, 8)
        h = self.norm(self.tokens(torch.tanh(h))).mean(1)
        out = self.narrow(torch.tanh(self.wide(torch.tanh(h)))).squeeze(-1)
        return (out - 1).pow(2) + 0.1 * h.pow(2).sum(-1)


def tiny(dtype=torch.float64):
    torch.manual_seed(3)
    model = Tiny().to(dtype)
    with torch.no_grad():  # non-trivial LayerNorm affine parameters
        model.norm.weight.uniform_(0.5, 1.5)
        model.norm.bias.uniform_(-0.5, 0.5)
    return model


def tiny_inputs(height, width, batch=8, dtype=torch.float64):
    return torch.randn(batch, 2, height, width, generator=torch.Generator().manual_seed(4), dtype=dtype)


def check_tiny(model, x, linear_paths, expected_paths):
    reference, norms, _ = naive_clipped_sum(model, lambda i: model(x[i : i + 1]), len(x), 1.0)
    clip_norm = float(norms.median())
    reference, norms, factors = naive_clipped_sum(model, lambda i: model(x[i : i + 1]), len(x), clip_norm)
    assert (factors < 0.999).any() and (factors == 1).any()
    summer = ClippedGradientSum(model, clip_norm)
    _, got = summer.add(lambda: model(x))
    torch.testing.assert_close(got.double(), norms, rtol=1e-5, atol=0)
    assert_sums_close(summer.sums, reference, 1e-5)
    assert {name: linear_paths[getattr(model, name)] for name in expected_paths} == expected_paths
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize(
    "height, width, token_path",
    [(1, 2, "ghost"), (4, 4, "formed")],
)
def test_tiny_model_with_both_linear_paths_equals_naive_loop(height, width, token_path, linear_paths):
    model = tiny()
    check_tiny(
        model, tiny_inputs(height, width), linear_paths, {"tokens": token_path, "wide": "ghost", "narrow": "formed"}
    )


def test_frozen_parameters_are_left_out_of_the_norm_and_the_sums(linear_paths):
    model = tiny()
    model.conv.requires_grad_(False)
    model.tokens.bias.requires_grad_(False)
    model.norm.weight.requires_grad_(False)
    check_tiny(model, tiny_inputs(4, 4), linear_paths, {"tokens": "formed", "wide": "ghost", "narrow": "formed"})
    summer = ClippedGradientSum(model, 1.0)
    assert len(summer.sums) == len(trainable(model)) == 6


def test_empty_batch_adds_nothing():
    model = tiny(torch.float32)
    x = tiny_inputs(4, 4, dtype=torch.float32)
    summer = ClippedGradientSum(model, 1.0)
    losses, norms = summer.add(lambda: model(x[:0]))
    assert losses.shape == norms.shape == (0,)
    assert summer.examples == 0 and all(not total.any() for total in summer.sums)
    summer.add(lambda: model(x))
    before = [total.clone() for total in summer.sums]
    summer.add(lambda: model(x[:0]))
    assert summer.examples == len(x)
    assert all(torch.equal(a, b) for a, b in zip(before, summer.sums))


# --- what cannot be clipped exactly is refused --------------------------------------------


class BareParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.offset = nn.Parameter(torch.zeros(4))

    def forward(self, x):
        return (self.linear(x) + self.offset).pow(2).sum(-1)


class WithBilinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.pair = nn.Bilinear(4, 4, 2)

    def forward(self, x):
        h = self.linear(x)
        return self.pair(h, h).pow(2).sum(-1)


class CalledTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(torch.tanh(self.linear(x))).pow(2).sum(-1)


class NestedBareParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = BareParameter()

    def forward(self, x):
        return self.inner(x)


def test_bare_parameter_is_refused_by_name():
    with pytest.raises(DpvipInputError, match=r"parameters offset: "):
        ClippedGradientSum(BareParameter(), 1.0)
    with pytest.raises(DpvipInputError, match=r"parameters inner\.offset: "):
        ClippedGradientSum(NestedBareParameter(), 1.0)


def test_layer_without_a_per_example_rule_is_refused():
    assert nn.Bilinear not in GradSampleModule.GRAD_SAMPLERS  # else pick another layer here
    with pytest.raises(DpvipInputError, match=r"'pair' \(Bilinear\).*pair\.weight, pair\.bias"):
        ClippedGradientSum(WithBilinear(), 1.0)


def test_layer_called_twice_in_one_forward_is_refused():
    model = CalledTwice()
    summer = ClippedGradientSum(model, 1.0)
    with pytest.raises(DpvipInputError, match="twice"):
        summer.add(lambda: model(torch.randn(3, 4)))
    # Outside add() the hooks record nothing: the model still runs normally.
    assert model(torch.randn(3, 4)).shape == (3,)


@pytest.mark.parametrize("clip_norm", [0.0, -1.0, float("nan")])
def test_clip_norm_must_be_positive(clip_norm):
    with pytest.raises(DpvipInputError, match="clip norm"):
        ClippedGradientSum(tiny(), clip_norm)


def test_close_removes_the_hooks():
    model = CalledTwice()
    summer = ClippedGradientSum(model, 1.0)
    summer.close()
    assert not model.linear._forward_hooks


class Tied(nn.Module):
    """Two Linear layers sharing one weight (weight tying)."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 4, bias=False)
        self.second = nn.Linear(4, 4, bias=False)
        self.second.weight = self.first.weight

    def forward(self, x):
        return self.second(torch.tanh(self.first(x))).pow(2).sum(-1)


def test_weight_shared_by_two_layers_is_refused():
    """Per-layer squared norms would add |g1|^2 + |g2|^2 instead of |g1 + g2|^2 and
    under-estimate the sensitivity, so a weight shared by two layers is refused by name."""
    with pytest.raises(DpvipInputError, match="parameter 'second.weight' is shared with 'first.weight'"):
        ClippedGradientSum(Tied().double(), 1.0)


class TokenFlattened(nn.Module):
    """A model that feeds its Linear layer (B * L, d) rows: tokens flattened into the batch."""

    def __init__(self):
        super().__init__()
        self.tokens = nn.Linear(4, 2)

    def forward(self, x):  # x: (B, L, 4)
        return self.tokens(x.reshape(-1, 4)).reshape(x.shape[0], -1).sum(1)


def test_a_layer_fed_flattened_tokens_is_refused_by_name():
    """Finding 7 of the privacy review: such a layer would be clipped per token, one example
    reaching norm 3.11 at C = 1 and counted as 16 examples."""
    model = TokenFlattened()
    clipper = ClippedGradientSum(model, 1.0)
    with pytest.raises(DpvipInputError, match="layer 'tokens' \\(Linear\\) gives 48 per-example norms for 3 examples"):
        clipper.add(lambda: model(torch.randn(3, 16, 4)) ** 2)
