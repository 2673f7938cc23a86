"""`dpvip bench dp-ops` (`dpvip.bench.operations`): the operation counter itself, the CUDA
path counted on a CPU (its stand-ins compute what the CPU path computes), and the number of
operations the DP step adds per watched layer on that path, the host work that bounds a
GPU step."""

import collections

import torch

from dpvip.bench.methods import BenchSetup, make_methods
from dpvip.bench.operations import OperationCounter, _counted_paths, count_operations
from dpvip.privacy.clipping import ClippedGradientSum

MICRO_BF16 = BenchSetup(batch=4, micro_batch=2, precision="bf16")


def test_the_counter_counts_launching_operations_only():
    a = torch.ones(3)
    with OperationCounter() as counter:
        b = a + 1  # add
        c = b.view(3, 1).t()  # two views: no launch
        c.sum()  # sum
        torch.empty(5)  # an allocation: no launch
    assert counter.counts == collections.Counter({"add.Tensor": 1, "sum.default": 1})
    counter.launched("triton.kernel")
    assert counter.total == 3


def test_the_cuda_path_on_a_cpu_computes_what_the_cpu_path_computes():
    # The stand-ins (16-bit products into float32 widened, the fused ghost norm from the
    # batched products, the in-place addmm) must give the clipped sums of the CPU path:
    # the counts of the CUDA path are then those of a working step, not of a broken one.
    methods, images, noise = make_methods(["ours", "nonprivate"], MICRO_BF16)
    ours = methods["ours"]
    plain = ours.clipped_sum(images, noise)
    counter = OperationCounter(emulate_float32_products=True)
    with _counted_paths(counter, [], emulate=True), counter:
        emulated = ours.clipped_sum(images, noise)
    assert counter.counts["triton.ghost_norm"] > 0 and counter.counts["addmm.dtype_out"] > 0
    for got, want in zip(emulated, plain, strict=True):
        assert (got - want).abs().max() <= 1e-5 * want.abs().max() + 1e-12


def test_the_dp_step_adds_few_operations_per_layer_on_the_cuda_path():
    # Measured (bf16, two micro-batches, the CUDA path counted here): 2.1 operations per watched
    # layer and micro-batch beyond the non-private step's for the micro MAE (ViP-Base: 1.8);
    # before the formed parts were taken together, the in-place addmm and the unzeroed ghost-norm
    # output, 5.6 (ViP-Base 5.7). On a GPU each is ~40 us of host time (docs/measurements.md).
    result = count_operations(MICRO_BF16, ["ours"], gpu_path=True)
    model, _, _ = MICRO_BF16.build()
    layers = len(ClippedGradientSum(model, 1.0).layers)
    added = (result.total("ours") - result.total("nonprivate")) / 2 / layers
    assert 0 < added <= 2.5, result.added("ours")
    cpu_path = count_operations(MICRO_BF16, ["ours"])
    assert cpu_path.total("ours") > result.total("ours")  # the CPU widens what CUDA multiplies as is


def test_cli_prints_the_table(capsys):
    from dpvip.cli import main

    assert main(["bench", "dp-ops", "--batch", "2", "--micro-batch", "1", "--precision", "bf16", "--gpu-path"]) == 0
    out = capsys.readouterr().out
    assert "the CUDA path, counted on this CPU" in out and "ours against nonprivate:" in out


def test_cli_refuses_an_unknown_method(capsys):
    from dpvip.cli import main

    assert main(["bench", "dp-ops", "--methods", "ours", "bogus"]) == 2
    assert "method 'bogus' is not one of" in capsys.readouterr().err
