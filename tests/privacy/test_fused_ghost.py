"""The fused ghost-norm kernel (`dpvip.privacy.fused_ghost`), run on CPU by Triton's
interpreter in a subprocess (the interpreter is chosen when Triton compiles, from the
environment): against float64 within the clip bound's own error term, for every tile shape,
on shapes whose tokens do not fill the tiles and on cancelling tokens; the tuned kernel
after it has timed its tile shapes; and the clipper using it under bf16 autocast. The GPU
check (tests/gpu/dp_speed.py's `bound`) runs the compiled kernel on the device."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")

SCRIPT = """
import json, sys, torch
sys.path.insert(0, {tests!r})
from test_rounding import cancelling_example, exact_norm_sum, exact_squared_norms, fused_ghost_errors, random_example
from dpvip.privacy import gram_kernel
from dpvip.privacy.fused_ghost import fused_ghost_squared_norms

out = {{"configs": [], "tuned": {{}}}}
torch.manual_seed(0)
empty = torch.empty  # the kernel's output is not zeroed: NaN in it shows any slot read but not written
torch.empty = lambda *shape, **options: empty(*shape, **options).fill_(float("nan"))
cases = [("bf16 50x40x70", torch.randn(3, 50, 40).bfloat16(), torch.randn(3, 50, 70).bfloat16()),
         ("fp16 97x64x33", torch.randn(2, 97, 64).half(), torch.randn(2, 97, 33).half()),
         ("bf16 5x16x16", torch.randn(2, 5, 16).bfloat16(), torch.randn(2, 5, 16).bfloat16()),
         ("bf16 strided", torch.randn(2, 60, 50).bfloat16().transpose(1, 2), torch.randn(2, 60, 30).bfloat16()[:, :50])]
for seed, scale in ((0, 1.0), (1, 2.0**13), (2, 2.0**-13)):
    a, g = cancelling_example(64, scale, 256, 192, seed)
    cases.append((f"cancelling x{{scale}}", a.bfloat16(), g.bfloat16()))
a, g = random_example(96, fan_in=128, fan_out=96)
cases.append(("random 96x128x96", a.bfloat16(), g.bfloat16()))
for name, a, g in cases:
    for config in gram_kernel.CONFIGS:
        errors = fused_ghost_errors(a, g, kernel=gram_kernel.ghost_norm_tiles, **config.kwargs)
        out["configs"].append([name, config.kwargs, *errors])

calls = []
def later_is_faster(run, quantiles):  # the last tile shape timed wins: a 64-token one
    run()
    calls.append(1)
    return [1.0 / len(calls)] * 3

a, g = torch.randn(3, 97, 40).bfloat16(), torch.randn(3, 97, 30).bfloat16()
tuner = gram_kernel.tuned(later_is_faster)
got, norm_sum = fused_ghost_squared_norms(a, g, kernel=tuner)
out["tuned"] = {{"relative_error": float(((got / exact_squared_norms(a, g)) - 1).abs().max()),
                "norm_sum_relative_error": float((norm_sum / exact_norm_sum(a, g) - 1).abs().max()),
                "chosen": tuner.best_config.kwargs, "timed": len(calls)}}
print(json.dumps(out))
"""

CLIPPER = """
import json, sys, torch
sys.path.insert(0, {tests!r})
from test_rounding import cancelling_example, clipped_share, random_example
from dpvip.privacy import fused_ghost, layer_rules
calls = []
original = fused_ghost.fused_ghost_tiles
layer_rules.fused_ghost_tiles = lambda a, g: calls.append(a.shape) or original(a, g)
shares = []
for scale in (1.0, 2.0**13, 2.0**-13):
    a, g = cancelling_example(64, scale, 256, 192)
    share, norm = clipped_share(a, g, 1e-3 * scale)
    shares.append(float(torch.linalg.norm(share)) / (1e-3 * scale))
a, g = random_example(64, fan_in=256, fan_out=192)
share, norm = clipped_share(a, g, 1e-3)
random_share = float(torch.linalg.norm(share)) / 1e-3
print(json.dumps({{"shares_over_c": shares, "random_share_over_c": random_share, "fused_calls": len(calls)}}))
"""

TWO_LAYERS = """
import json, torch
from torch import nn
from dpvip.privacy import fused_ghost, layer_rules
from dpvip.privacy.clipping import ClippedGradientSum

class TwoTokenCounts(nn.Module):  # ghost norms on 40 tokens (4 tiles of 32) and on 20 (1 tile)
    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(128, 128), nn.Linear(256, 96)
    def forward(self, x):
        return self.second(self.first(x).reshape(x.shape[0], 20, 256))

calls = []
original = fused_ghost.fused_ghost_tiles
layer_rules.fused_ghost_tiles = lambda a, g: calls.append(tuple(a.shape)) or original(a, g)
torch.manual_seed(0)
model, x = TwoTokenCounts(), torch.randn(5, 40, 128) * torch.tensor([1.0, 3.0, 0.1, 10.0, 1.0])[:, None, None]
target = torch.randn(5, 20, 96)
out = {{}}
for fused in (True, False):
    layer_rules.fused_ghost_runs_on = lambda device: fused
    summer = ClippedGradientSum(model, 1000.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, norms = summer.add(lambda: ((model(x).float() - target) ** 2).sum((1, 2)))
    summer.close()
    out[str(fused)] = {{"norms": norms.tolist(), "sums": [float(t.norm()) for t in summer.sums]}}
out["fused_calls"] = calls
print(json.dumps(out))
"""


def interpreted(script: str) -> dict:
    tests = str(Path(__file__).parent)
    environment = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run(
        [sys.executable, "-c", script.format(tests=tests)], capture_output=True, text=True, env=environment, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def kernel_results() -> dict:
    return interpreted(SCRIPT)


def test_every_tile_shape_is_within_the_clip_bounds_error_term(kernel_results):
    # |N^2 - ||W||^2| <= e S^2 (`rounding.ghost_bound`, item 1) for every config and case,
    # including cancelling tokens (||W|| ~ S / 2^11) at activations x 2^13 and x 2^-13; S
    # from the Grams' diagonals, enlarged, is never below the exact S, and is S to float32.
    assert len(kernel_results["configs"]) == 8 * 4
    for name, config, error_over_bound, exact_over_enlarged, norm_sum_error in kernel_results["configs"]:
        assert error_over_bound <= 1.0, (name, config, error_over_bound)
        assert exact_over_enlarged <= 1.0, (name, config, exact_over_enlarged)
        assert norm_sum_error < 1e-5, (name, config, norm_sum_error)


def test_the_tuned_kernel_reads_only_the_tiles_of_its_last_launch(kernel_results):
    # `out` starts as NaN (not zeroed) and the tuner times every tile shape, a 32-token one
    # first (16 slots of 97 tokens, whose values stay in `out`), then keeps a 64-token one
    # (4 slots): the sum must read exactly the kept launch's slots, each of which it wrote
    # (below the diagonal too). Reading the first launch's 16 slots gives stale tiles, and a
    # slot left unwritten gives NaN: either fails the tolerances.
    tuned = kernel_results["tuned"]
    assert tuned["chosen"]["BLOCK_T"] == 64 and tuned["timed"] == 4  # each of gram_kernel.CONFIGS
    assert tuned["relative_error"] < 1e-6
    assert tuned["norm_sum_relative_error"] < 1e-6


def test_the_clipper_uses_it_and_keeps_each_share_within_c():
    result = interpreted(CLIPPER)
    assert result["fused_calls"] == 4  # one ghost-norm layer, four inputs
    assert max(result["shares_over_c"]) <= 1.0  # cancelling tokens: ~0.02 C, as on the GPU
    assert result["random_share_over_c"] >= 0.95  # random tokens: clipped to about C, not to nothing


def test_layers_with_other_tile_counts_are_summed_each_as_its_own():
    # The clipper sums every fused layer's tiles at once (`summed_tiles`): norms and clipped
    # sums as with the batched products, on layers of 4 and 1 tiles, some examples clipped.
    result = interpreted(TWO_LAYERS)
    assert result["fused_calls"] == [[5, 20, 256], [5, 40, 128]]  # the backward pass's order
    fused, batched = result["True"], result["False"]
    assert min(fused["norms"]) < 1000.0 < max(fused["norms"])  # clipped and unclipped examples
    for got, expected in zip(fused["norms"] + fused["sums"], batched["norms"] + batched["sums"]):
        assert abs(got - expected) <= 1e-5 * expected


def test_summed_tiles_are_each_layers_own_sums():
    from dpvip.privacy.fused_ghost import summed_tiles

    torch.manual_seed(0)
    tiles = [torch.randn(3, 2, count, dtype=torch.float64) for count in (9, 1, 4, 1)]
    squares, norm_sums = summed_tiles(tiles)
    per_layer = torch.stack([part.sum(2) for part in tiles])  # (layers, examples, 2)
    assert torch.allclose(squares, per_layer[:, :, 0].sum(0), rtol=1e-12)
    assert torch.allclose(norm_sums, per_layer[:, :, 1], rtol=1e-12)


def test_the_output_has_room_for_the_smallest_tile_shape():
    # `out` is sized for SMALLEST_TILE-token tiles: a smaller tile shape would write past it.
    from dpvip.privacy import gram_kernel
    from dpvip.privacy.fused_ghost import SMALLEST_TILE

    assert min(config.kwargs["BLOCK_T"] for config in gram_kernel.CONFIGS) == SMALLEST_TILE
