"""What `ClippedGradientSum` refuses, each with a one-line `DpvipInputError` naming the layer
by its name in the model (docs/privacy.md, "Supported layers"): any BatchNorm, with or
without affine parameters; a module with trainable parameters and no per-example rule (a
custom layer, a LayerNorm subclass, a bare nn.Parameter such as timm's class token); a
layer's parameter used without calling the layer. And what the own-loop example relies
on: a timm ViT with torch's LayerNorm and its class token and position embedding frozen is
accepted and clipped exactly."""

import pytest
import timm
import torch
import torch.nn.functional as F
import torchvision
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from dpvip.errors import DpvipInputError
from dpvip.privacy.clipping import CLIP_EPSILON, ClippedGradientSum
from dpvip.randp.private import check_no_batchnorm

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def refusal(model: nn.Module, *args) -> str:
    with pytest.raises(DpvipInputError) as caught:
        summer = ClippedGradientSum(model, 1.0)
        summer.add(*args)
    message = str(caught.value)
    assert "\n" not in message  # one line
    return message


def group_norm_resnet() -> nn.Module:
    return torchvision.models.resnet18(num_classes=3, norm_layer=lambda c: nn.GroupNorm(min(32, c), c))


def test_a_group_norm_resnet18_is_accepted():
    summer = ClippedGradientSum(group_norm_resnet(), 1.0)
    assert any(isinstance(layer, nn.GroupNorm) for layer in summer.layers)


@pytest.mark.parametrize(
    "batch_norm",
    [
        lambda: nn.BatchNorm2d(64),
        lambda: nn.BatchNorm2d(64, affine=False),  # no parameters: it used to pass silently
        lambda: nn.BatchNorm2d(64).requires_grad_(False),  # frozen: its batch statistics still mix
        lambda: nn.SyncBatchNorm(64),
        lambda: nn.LazyBatchNorm2d(),
    ],
    ids=["affine", "no-affine", "frozen", "sync", "lazy"],
)
def test_any_batch_norm_is_refused_by_its_name_in_the_model(batch_norm):
    model = group_norm_resnet()
    model.layer1[0].bn1 = batch_norm()
    kind = type(model.layer1[0].bn1).__name__
    message = refusal(model)
    assert message.startswith(f"layer 'layer1.0.bn1' ({kind}) is a BatchNorm: its batch statistics mix the examples")


def test_a_parameter_free_batch_norm1d_as_a_linear_probe_has_it_is_refused():
    model = nn.Sequential(nn.BatchNorm1d(8, affine=False), nn.Linear(8, 2))
    assert "layer '0' (BatchNorm1d) is a BatchNorm" in refusal(model)
    torchvision_default = torchvision.models.resnet18(num_classes=2)  # BatchNorm everywhere
    assert refusal(torchvision_default).startswith("layer 'bn1' (BatchNorm2d) is a BatchNorm")


def test_dp_randps_guard_is_the_clippers():
    network = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, affine=False))
    with pytest.raises(DpvipInputError, match=r"^layer '1' \(BatchNorm2d\) is a BatchNorm"):
        check_no_batchnorm(network)


class Scale(nn.Module):
    """A custom layer with a trainable parameter used in its own forward: opacus has no grad
    sampler for it."""

    def __init__(self, width: int):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(width))

    def forward(self, x):
        return x * self.gain


def test_a_custom_layer_without_a_per_example_rule_is_refused_unless_frozen():
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(Scale(4)), nn.Linear(4, 2))
    message = refusal(model)
    assert message.startswith(
        "layer '1.0' (Scale) has no per-example gradient rule for its trainable parameters 1.0.gain:"
    )
    assert "requires_grad_(False)" in message
    model[1][0].gain.requires_grad_(False)
    assert model[1][0] not in ClippedGradientSum(model, 1.0).layers


def test_a_subclass_of_layer_norm_is_refused_naming_torchs():
    model = nn.Sequential(nn.Linear(4, 4), timm.layers.LayerNorm(4))
    message = refusal(model)
    assert message.startswith("layer '1' (LayerNorm) has no per-example gradient rule")
    assert "it subclasses LayerNorm" in message and "norm_layer=nn.LayerNorm" in message


def tiny_vit(**options) -> VisionTransformer:
    torch.manual_seed(0)
    return VisionTransformer(img_size=16, patch_size=8, embed_dim=16, depth=2, num_heads=2, num_classes=3, **options)


def test_timms_class_token_and_position_embedding_are_refused_as_bare_parameters():
    message = refusal(tiny_vit(norm_layer=nn.LayerNorm))
    assert message.startswith(
        "the model itself (VisionTransformer) has no per-example gradient rule for its trainable parameters "
        "cls_token, pos_embed:"
    )
    frozen_tokens = tiny_vit()  # timm's own LayerNorm, next
    frozen_tokens.cls_token.requires_grad_(False)
    frozen_tokens.pos_embed.requires_grad_(False)
    assert refusal(frozen_tokens).startswith("layer 'blocks.0.norm1' (LayerNorm) has no per-example gradient rule")


class OutsideUse(nn.Module):
    """A Linear layer whose weight the forward uses without calling the layer."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 4)
        self.proj = nn.Linear(4, 2)
        self.unused = nn.Linear(4, 4)  # never run, never used: allowed (it gets no gradient)

    def forward(self, x):
        return F.linear(torch.tanh(self.embed(x)), self.proj.weight).pow(2).sum(-1)


def test_a_parameter_used_without_calling_its_layer_is_refused():
    model = OutsideUse()
    message = refusal(model, lambda: model(torch.randn(5, 4)))
    assert message.startswith(
        "parameter 'proj.weight' of layer 'proj' (Linear) is used without calling the layer (F.linear(x, layer.weight)"
    )


def test_a_layer_that_does_not_run_is_still_allowed():
    model = OutsideUse()
    model.forward = lambda x: model.proj(torch.tanh(model.embed(x))).pow(2).sum(-1)
    summer = ClippedGradientSum(model, 1.0)
    for _ in range(2):
        summer.add(lambda: model(torch.randn(5, 4)))
    unused = [total for param, total in zip(summer.params, summer.sums) if param in set(model.unused.parameters())]
    assert len(unused) == 2 and all(not total.any() for total in unused)


def test_a_timm_vit_with_frozen_tokens_and_torchs_layer_norm_is_clipped_exactly():
    """What examples/own_loop_vision.py trains: timm's Attention (fused qkv Linear, scaled dot
    product attention), Mlp and PatchEmbed's Conv2d, against one example at a time."""
    model = tiny_vit(norm_layer=nn.LayerNorm).double()
    model.cls_token.requires_grad_(False)
    model.pos_embed.requires_grad_(False)
    images, labels = torch.randn(6, 3, 16, 16, dtype=torch.float64), torch.tensor([0, 1, 2, 0, 1, 2])
    params = [p for p in model.parameters() if p.requires_grad]
    grads = [
        torch.autograd.grad(F.cross_entropy(model(images[i : i + 1]), labels[i : i + 1]), params) for i in range(6)
    ]
    norms = torch.stack([torch.linalg.vector_norm(torch.cat([g.flatten() for g in grad])) for grad in grads])
    clip_norm = float(norms.median())  # some examples clipped, some not
    factors = (clip_norm / (norms + CLIP_EPSILON)).clamp(max=1.0)
    want = [sum(f * grad[k] for f, grad in zip(factors, grads)) for k in range(len(params))]
    summer = ClippedGradientSum(model, clip_norm)
    _, got_norms = summer.add(lambda: F.cross_entropy(model(images), labels, reduction="none"))
    torch.testing.assert_close(got_norms.double(), norms, rtol=1e-5, atol=0)
    for got, reference in zip(summer.sums, want):
        torch.testing.assert_close(got.double(), reference, rtol=1e-4, atol=1e-6)


def test_a_mean_reduced_loss_and_a_tensor_are_refused_saying_what_to_pass():
    """The PyTorch habit (a mean loss) and a tensor in place of the forward pass: one line
    each, naming the fix, instead of an IndexError or 'Tensor is not callable'."""
    layer, x, y = nn.Linear(4, 3), torch.randn(5, 4), torch.arange(5) % 3
    message = refusal(layer, lambda: F.cross_entropy(layer(x), y))
    assert "one value per example" in message and "reduction='none'" in message
    message = refusal(layer, F.cross_entropy(layer(x), y, reduction="none"))
    assert "a callable that runs the forward pass" in message and "not a Tensor" in message
