"""`dpvip bench dp-step`: the methods it times compute the same clipped sums, and the command
prints what it promises. Nothing here asserts on speed."""

import json

import pytest
import torch

from dpvip.privacy.bench import EXPECTED_WARNINGS, METHODS, BenchSetup, make_methods, max_relative_difference
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


def test_micro_batches_add_up_to_the_batch():
    methods, images, noise = make_methods(["ours"], BenchSetup(batch=4, micro_batch=3))
    ours = methods["ours"]
    chunks = ours.chunks(images, noise)
    assert [len(x) for x, _ in chunks] == [3, 1]
    summed = [a + b for a, b in zip(*(ours.clipped_sum(x, n) for x, n in chunks))]
    assert max_relative_difference(summed, ours.clipped_sum(images, noise)) <= 1e-5


@pytest.mark.slow
def test_cli_json_has_every_method_and_positive_ratios():
    done = run_dpvip("bench", "dp-step", "--rounds", "1", "--warmup", "0", "--batch", "4", "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert set(record["methods"]) == set(METHODS)
    assert record["model"] == "micro" and record["batch"] == 4 and record["threads"] == 1
    assert record["device"] == "cpu" and record["torch"] == torch.__version__
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
