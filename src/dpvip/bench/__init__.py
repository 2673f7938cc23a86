"""`dpvip bench dp-step`: one DP-AdamW training step of an MAE by several per-example
gradient methods (dpvip's own `DPStep` among them), side by side on the same model, batch and mask noise, against the
non-private step of the same model and batch.

Modules: `methods` (the setup, the methods `nonprivate`, `ours`, `vmap`, `opacus_hooks`,
`opacus_ghost`, and the DP constants), `timing` (runners stepping a method in this process
or in its own forked one, the cross-check of clipped sums, round-robin timing), `heap`
(the glibc heap of the timed processes), `memory` (peak growth of CUDA memory or of the
resident set), `shares` (ours' noise and per-example norms timed alone), `report`
(`run_bench`, `BenchResult`, `format_result`), `operations` (`dpvip bench dp-ops`). The
names used by the command line and the tests are re-exported here.
"""

from dpvip.bench.memory import MEMORY_MODES, MEMORY_STEPS, cpu_peak_growth, cuda_peak_growth, memory_method
from dpvip.bench.methods import (
    CLIP_NORM,
    EXPECTED_WARNINGS,
    LEARNING_RATE,
    METHOD_CLASSES,
    METHODS,
    NOISE_MULTIPLIER,
    BenchSetup,
    Method,
    make_method,
    make_methods,
    max_relative_difference,
    trainable,
)
from dpvip.bench.report import TARGET_MEMORY_RATIO, TARGET_TIME_RATIO, BenchResult, format_result, run_bench
from dpvip.bench.timing import LocalRunner, ProcessRunner, cross_check, time_methods

__all__ = [
    "CLIP_NORM",
    "EXPECTED_WARNINGS",
    "LEARNING_RATE",
    "MEMORY_MODES",
    "MEMORY_STEPS",
    "METHOD_CLASSES",
    "METHODS",
    "NOISE_MULTIPLIER",
    "TARGET_MEMORY_RATIO",
    "TARGET_TIME_RATIO",
    "BenchResult",
    "BenchSetup",
    "LocalRunner",
    "Method",
    "ProcessRunner",
    "cpu_peak_growth",
    "cross_check",
    "cuda_peak_growth",
    "format_result",
    "make_method",
    "make_methods",
    "max_relative_difference",
    "memory_method",
    "run_bench",
    "time_methods",
    "trainable",
]
