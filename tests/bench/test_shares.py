"""`dpvip.bench.shares`: the per-example norms timed alone are the clipper's own norm rules on
the inputs it gave them, for every watched layer, once per micro-batch of a step; the report
states the noise's and the norms' shares of ours' step and what is left."""

import itertools

import pytest
import torch

from dpvip.bench import EXPECTED_WARNINGS, BenchResult, BenchSetup
from dpvip.bench import shares
from dpvip.bench.report import _shares_of_ours, format_result
from dpvip.synthetic.family import thread_invariant

pytestmark = [pytest.mark.filterwarnings(f"ignore:{message}") for message in EXPECTED_WARNINGS]


@pytest.fixture(autouse=True)
def single_thread():
    with thread_invariant(torch.device("cpu")):
        yield


def watched_layers(setup: BenchSetup) -> int:
    model, _, _ = setup.build()
    return sum(1 for layer in model.modules() if any(p.requires_grad for p in layer.parameters(recurse=False)))


def test_the_recorded_rules_give_the_norms_the_clipper_returned():
    setup = BenchSetup(batch=6, micro_batch=4)
    calls, norms, micro_batches = shares.recorded_norm_calls(setup)
    assert micro_batches == 2 and norms.shape == (4,)  # the first micro-batch's examples
    assert len(calls) == watched_layers(setup) and len({id(call.layer) for call in calls}) == len(calls)
    squared = torch.stack([part for call in calls for part in call.run()]).sum(0)
    assert torch.allclose(squared.sqrt(), norms, rtol=1e-5)
    assert not any(call.bounded for call in calls)


def test_under_bf16_the_rules_run_bounded_as_in_the_step():
    calls, _, _ = shares.recorded_norm_calls(BenchSetup(batch=4, precision="bf16"))
    assert calls and all(call.bounded for call in calls)  # autocast: every layer bounded, LayerNorms' fp32 too
    linear = [call for call in calls if isinstance(call.layer, torch.nn.Linear)]
    assert linear and all(call.backprops.dtype == torch.bfloat16 for call in linear)
    ghost = [part for call in calls for part in call.run() if part is not None]
    assert ghost and all(part.dtype == torch.float64 for part in ghost)  # summed wide, as the bound assumes


def test_the_norms_seconds_are_a_micro_batchs_times_the_step_s_micro_batches(monkeypatch):
    ticks = itertools.count()
    monkeypatch.setattr(shares.time, "perf_counter", lambda: float(next(ticks)))  # each round: 1 s
    timed = shares.time_norms(BenchSetup(batch=6, micro_batch=2), rounds=3)
    assert timed == {"layers": watched_layers(BenchSetup()), "micro_batches": 3, "seconds": 3.0}


def result_with(noise: float, norms: float, ours: float, nonprivate: float) -> BenchResult:
    samples = {
        name: {"seconds": [seconds], "cpu_seconds": [seconds], "minor_faults": [0]}
        for name, seconds in (("nonprivate", nonprivate), ("ours", ours))
    }
    return BenchResult(
        BenchSetup(),
        1,
        1,
        0,
        samples,
        {},
        {},
        noise={"parameters": 10, "seconds": noise},
        norms={"layers": 7, "micro_batches": 2, "seconds": norms},
    )


def test_the_report_gives_each_share_and_what_is_left():
    lines = _shares_of_ours(result_with(noise=1.0, norms=2.0, ours=10.0, nonprivate=5.0))
    assert "4 draws each): 1.0000 s = 10% of ours' step" in lines[0]
    assert "(7 layers' norm rules" in lines[1] and "times 2 micro-batch(es)): 2.0000 s = 20% of ours' step" in lines[1]
    assert lines[2].startswith("ours' step less the noise and the norms: 1.40x the non-private step")
    assert "1.40x" in format_result(result_with(1.0, 2.0, 10.0, 5.0))
