"""`dpvip bench dp-step`: the methods it times compute the same clipped sums, and the command
prints what it promises. Nothing here asserts on speed."""

import json

import pytest
import torch

from dpvip.bench import EXPECTED_WARNINGS, METHODS, BenchSetup, make_methods, max_relative_difference
from dpvip.errors import DpvipInputError
from dpvip.synthetic.family import thread_invariant
from conftest import run_dpvip

pytestmark = [pytest.mark.filterwarnings(f"ignore:{message}") for message in EXPECTED_WARNINGS]


@pytest.fixture(autouse=True)
def single_thread():
    with thread_invariant(torch.device("cpu")):
        yield


def test_clipped_sums_agree_across_methods():
    private = [name for name in METHODS if name != "nonprivate"]
    methods, images, noise = make_methods(private, BenchSetup(batch=4))
    reference = methods["ours"].clipped_sum(images, noise)
    assert any(total.abs().max() > 0 for total in reference)
    for name in private[1:]:
        sums = methods[name].clipped_sum(images, noise)
        assert [s.shape for s in sums] == [r.shape for r in reference]
        assert max_relative_difference(sums, reference) <= 1e-5, name


def test_ours_steps_through_dpstep_as_the_other_methods_step():
    """`ours` times the library's DPStep itself: one noisy step (micro-batched) charges its
    ledger and lands on the parameters that vmap's step, with the same noise, lands on."""
    setup = BenchSetup(batch=4, micro_batch=3)
    methods, images, noise = make_methods(["ours", "vmap"], setup)
    before = [p.detach().clone() for p in methods["ours"].params]
    for method in methods.values():
        method.step(images, noise)
    assert methods["ours"].dp_step.ledger.steps_done == 1
    moved = [p.detach() - b for p, b in zip(methods["ours"].params, before)]
    assert any(m.abs().max() > 0 for m in moved)
    assert max_relative_difference(methods["ours"].params, methods["vmap"].params) <= 1e-5


def test_bf16_autocast_keeps_the_clipped_sums_close_to_fp32():
    """--precision bf16 runs the forward passes in bfloat16: ours and vmap still agree with
    each other, and with fp32 to bfloat16's precision (a wrong cast would be off by far more)."""
    fp32, images, noise = make_methods(["ours"], BenchSetup(batch=4))
    bf16 = make_methods(["ours", "vmap"], BenchSetup(batch=4, precision="bf16"))[0]
    reference = fp32["ours"].clipped_sum(images, noise)
    ours = bf16["ours"].clipped_sum(images, noise)
    assert all(total.dtype == torch.float32 for total in ours)
    assert 0 < max_relative_difference(ours, reference) <= 0.05
    assert max_relative_difference(bf16["vmap"].clipped_sum(images, noise), ours) <= 0.05


def test_an_unknown_precision_is_refused():
    with pytest.raises(DpvipInputError, match="precision 'fp8'"):
        BenchSetup(precision="fp8").settings()


def test_micro_batches_add_up_to_the_batch():
    methods, images, noise = make_methods(["ours"], BenchSetup(batch=4, micro_batch=3))
    ours = methods["ours"]
    chunks = ours.chunks(images, noise)
    assert [len(x) for x, _ in chunks] == [3, 1]
    summed = [a + b for a, b in zip(*(ours.clipped_sum(x, n) for x, n in chunks))]
    assert max_relative_difference(summed, ours.clipped_sum(images, noise)) <= 1e-5
    # the cross-check's sum is taken micro-batch by micro-batch: the same values, bit for bit
    batch = ours.batch_clipped_sum(images, noise)
    assert all(torch.equal(a, b) for a, b in zip(batch, summed))


@pytest.mark.slow
def test_cli_json_has_every_method_and_positive_ratios():
    done = run_dpvip("bench", "dp-step", "--rounds", "1", "--warmup", "0", "--batch", "4", "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert set(record["methods"]) == set(METHODS)
    assert record["model"] == "micro" and record["batch"] == 4 and record["threads"] == 1
    assert record["device"] == "cpu" and record["torch"] == torch.__version__ and record["cpu_heap"] == "kept"
    for name, row in record["methods"].items():
        assert row["seconds_per_step"] > 0 and row["time_ratio"] > 0 and row["cpu_time_ratio"] > 0, name
        assert row["peak_mb"] > 0 and row["memory_ratio"] > 0, name
    assert record["methods"]["nonprivate"]["time_ratio"] == 1.0
    assert record["cross_check"]["reference"] == "ours"
    assert all(record["cross_check"][name] <= 1e-5 for name in METHODS[2:])


def test_cli_bad_model_is_one_line_exit_2():
    done = run_dpvip("bench", "dp-step", "--model", "huge")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "huge" in done.stderr
    assert done.stdout == ""


def test_the_non_private_step_accumulates_micro_batches_to_the_one_pass_gradient():
    """With --micro-batch every method splits the batch; the non-private gradient is unchanged."""
    split = make_methods(["nonprivate"], BenchSetup(batch=5, micro_batch=2))[0]["nonprivate"]
    whole, images, noise = make_methods(["nonprivate"], BenchSetup(batch=5))
    whole = whole["nonprivate"]
    for method in (split, whole):
        method.optimizer.step = lambda: None  # keep the gradient: compare it, not AdamW's step
        method.optimizer.zero_grad = lambda set_to_none=True: None
        method.step(images, noise)
    assert max_relative_difference([p.grad for p in split.params], [p.grad for p in whole.params]) <= 1e-5


def test_the_presets_set_the_shape_and_flags_override_them():
    from dpvip.cli import build_parser
    from dpvip.cli.bench import dp_step_shape

    keys = ("model", "image_size", "patch_size", "batch", "micro_batch", "device", "precision")

    def shape(*flags: str) -> tuple:
        found = dp_step_shape(build_parser().parse_args(["bench", "dp-step", *flags]))
        assert set(found) == set(keys)
        return tuple(found[key] for key in keys)

    assert shape("--preset", "vip-base") == ("base", 224, 16, 128, 32, "cpu", "fp32")
    assert shape("--preset", "vip-base", "--batch", "32")[3:5] == (32, 32)
    assert shape() == ("micro", 32, 4, 64, None, "cpu", "fp32")
    # paper: one GPU's share of a paper step, bf16 on CUDA; a flag still overrides it
    assert shape("--preset", "paper") == ("base", 224, 16, 2048, 256, "cuda", "bf16")
    assert shape("--preset", "paper", "--precision", "fp32")[-1] == "fp32"


def test_round_ratios_pair_each_step_with_the_non_private_step_of_its_round():
    from dpvip.bench import BenchResult, format_result

    # The load doubles every round; each round's pair of steps still says 1.1x of wall time.
    samples = {
        "nonprivate": {"seconds": [1.0, 2.0, 4.0], "cpu_seconds": [2.0, 4.0, 8.0], "minor_faults": [0, 0, 0]},
        "ours": {"seconds": [1.1, 2.2, 4.4], "cpu_seconds": [2.4, 4.0, 8.8], "minor_faults": [0, 0, 0]},
    }
    result = BenchResult(
        BenchSetup(), 1, 3, 0, samples, {}, {}, heap="kept", huge_pages=True, malloc="trim_threshold=1"
    )
    assert result.round_ratios("ours") == pytest.approx([1.1, 1.1, 1.1])
    assert result.round_ratios("ours", "cpu_seconds") == pytest.approx([1.2, 1.0, 1.1])
    text = format_result(result)
    assert "ours           wall 1.10x / 1.10x / 1.10x, CPU 1.00x / 1.10x / 1.20x" in text
    assert (
        "heap of the timed processes: kept (glibc trimming off, no block mmapped" in text
        and "glibc tunables at start: trim_threshold=1" in text
        and "(THP_MEM_ALLOC_ENABLE): on" in text
        and "ours <= 1.10x time, <= 1.15x memory" in text
    )


def test_the_report_reads_glibc_malloc_tunables_from_the_environment(monkeypatch):
    from dpvip.bench.report import malloc_tunables

    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert malloc_tunables() == "defaults"
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=9:glibc.cpu.x=1:glibc.malloc.mmap_threshold=8")
    assert malloc_tunables() == "trim_threshold=9, mmap_threshold=8"


HEAP_PROBE = """
import re, sys, torch
from dpvip.bench.heap import set_heap
from dpvip.bench.memory import _fix_mmap_threshold

def rss_mb():
    with open("/proc/self/status") as status:
        return int(re.search(r"VmRSS:\\s+(\\d+) kB", status.read()).group(1)) / 1024

_fix_mmap_threshold()  # from the memory phase's setting, so that only set_heap can keep memory
if sys.argv[1] == "kept":
    set_heap("kept")
count, mebibytes = int(sys.argv[2]), int(sys.argv[3])
before = rss_mb()
blocks = [None] * count  # allocated first: nothing of the probe's own lands above the blocks
for k in range(count):
    blocks[k] = torch.ones(mebibytes * 2**18)  # touched
for k in reversed(range(count)):  # from the top of the heap down, so that it can shrink as they go
    blocks[k] = None
print(rss_mb() - before)
"""


@pytest.mark.parametrize("blocks, mebibytes", [(300, 1), pytest.param(5, 64, marks=pytest.mark.slow)])
@pytest.mark.parametrize("mode, kept", [("kept", True), ("live", False)])
def test_a_kept_heap_holds_on_to_freed_memory(mode, kept, blocks, mebibytes):
    # The timed processes' heap: 300 or 320 MiB freed stays resident, to be reused by the next
    # step without page faults, in blocks of 1 MiB and of 64 MiB too (above glibc's largest
    # mmap threshold, 32 MiB: a ViP-Base step's activations at micro-batch 32). The contrast is
    # the memory phase's setting ("live": blocks of 128 KiB or more are mmapped, so freed ones
    # leave at once), not glibc's defaults, whose dynamic thresholds make the outcome vary.
    import subprocess
    import sys

    arguments = [sys.executable, "-c", HEAP_PROBE, mode, str(blocks), str(mebibytes)]
    done = subprocess.run(arguments, capture_output=True, text=True, check=True)
    still_resident_mb = float(done.stdout)
    assert (still_resident_mb > 250) if kept else (still_resident_mb < 50), still_resident_mb


def test_an_unknown_heap_mode_is_refused_by_name():
    from dpvip.errors import DpvipInputError
    from dpvip.bench import run_bench
    from dpvip.bench.heap import set_heap

    with pytest.raises(DpvipInputError, match="heap mode 'cached'"):
        set_heap("cached")
    with pytest.raises(DpvipInputError, match="heap mode 'cached'"):
        run_bench(BenchSetup(batch=2), ["ours"], heap="cached")
