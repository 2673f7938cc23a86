"""The `dpvip bench dp-step` benchmark as a whole: `run_bench` measures peak memory
(`memory`), starts a runner per method, cross-checks their clipped sums and times them
(`timing`), then times ours' noise and per-example norms alone (`shares`); `BenchResult`
holds the samples, medians and ratios to the non-private step (and the JSON record);
`format_result` prints the table.
"""

from __future__ import annotations

import os
import statistics
import warnings
from dataclasses import asdict, dataclass, field

import torch

from dpvip.errors import DpvipInputError
from dpvip.bench.heap import check_heap_mode, heap_description
from dpvip.bench.memory import MEMORY_MODES, MEMORY_STEPS, cpu_peak_growth, cuda_peak_growth, memory_method
from dpvip.bench.methods import (
    CLIP_NORM,
    EXPECTED_WARNINGS,
    METHOD_CLASSES,
    METHODS,
    NOISE_MULTIPLIER,
    BenchSetup,
    make_methods,
)
from dpvip.bench.shares import time_noise, time_norms
from dpvip.bench.timing import LocalRunner, ProcessRunner, cross_check, time_methods

TARGET_TIME_RATIO, TARGET_MEMORY_RATIO = 1.10, 1.15  # the project's targets (docs/measurements.md)
# torch's CPU allocator puts tensors of 2 MB or more on transparent huge pages when this is
# set (read once, at the first allocation): a 2 MB page fault instead of 512 small ones.
HUGE_PAGES_VARIABLE = "THP_MEM_ALLOC_ENABLE"


def huge_pages_on() -> bool:
    return os.environ.get(HUGE_PAGES_VARIABLE, "0") not in ("", "0")


def malloc_tunables() -> str:
    """glibc's malloc settings given at process start (GLIBC_TUNABLES), or "defaults"."""
    entries = [e for e in os.environ.get("GLIBC_TUNABLES", "").split(":") if e.startswith("glibc.malloc.")]
    return ", ".join(e.removeprefix("glibc.malloc.") for e in entries) or "defaults"


@dataclass
class BenchResult:
    setup: BenchSetup
    threads: int
    rounds: int
    warmup: int
    samples: dict[str, dict[str, list]]  # method -> seconds, cpu_seconds, minor_faults per step
    peak_bytes: dict[str, int | None]
    cross_check: dict
    memory_mode: str = "live"
    heap: str = "kept"  # the timing processes' heap (`heap.HEAP_MODES`; CPU only)
    noise: dict = field(default_factory=dict)  # parameters, seconds: the per-step noise draw alone
    norms: dict = field(default_factory=dict)  # layers, micro_batches, seconds: ours' per-example norms alone, a step
    torch_version: str = field(default_factory=lambda: torch.__version__)
    huge_pages: bool = field(default_factory=huge_pages_on)
    malloc: str = field(default_factory=malloc_tunables)

    def median(self, name: str) -> float:
        return statistics.median(self.samples[name]["seconds"])

    def time_ratio(self, name: str) -> float:
        return self.median(name) / self.median("nonprivate")

    def round_ratios(self, name: str, measure: str = "seconds") -> list[float]:
        """Per round, the method's step over the non-private step of the same round: the two
        ran back to back, so load drifting over the run cancels (the medians do not pair)."""
        return [a / b for a, b in zip(self.samples[name][measure], self.samples["nonprivate"][measure])]

    def cpu_median(self, name: str) -> float | None:
        return None if self.setup.device.startswith("cuda") else statistics.median(self.samples[name]["cpu_seconds"])

    def cpu_time_ratio(self, name: str) -> float | None:
        base = self.cpu_median("nonprivate")
        return self.cpu_median(name) / base if base else None

    def memory_ratio(self, name: str) -> float | None:
        peak, base = self.peak_bytes.get(name), self.peak_bytes.get("nonprivate")
        return peak / base if peak is not None and base else None

    def record(self) -> dict:
        import opacus

        methods = {
            name: {
                "seconds_per_step": self.median(name),
                "images_per_second": self.setup.batch / self.median(name),
                "time_ratio": self.time_ratio(name),
                "cpu_seconds_per_step": self.cpu_median(name),
                "cpu_time_ratio": self.cpu_time_ratio(name),
                "minor_faults_per_step": statistics.median(self.samples[name]["minor_faults"]),
                "peak_mb": None if self.peak_bytes.get(name) is None else self.peak_bytes[name] / 2**20,
                "memory_ratio": self.memory_ratio(name),
                "seconds": self.samples[name]["seconds"],
                "cpu_seconds": self.samples[name]["cpu_seconds"],
                "round_time_ratios": self.round_ratios(name),
                "round_cpu_time_ratios": None
                if self.cpu_median(name) is None
                else self.round_ratios(name, "cpu_seconds"),
            }
            for name in self.samples
        }
        return asdict(self.setup) | {
            "threads": self.threads,
            "rounds": self.rounds,
            "warmup": self.warmup,
            "torch": self.torch_version,
            "opacus": opacus.__version__,
            "noise_multiplier": NOISE_MULTIPLIER,
            "clip_norm": CLIP_NORM,
            "memory_steps": MEMORY_STEPS,
            "memory_mode": self.memory_mode,
            "cpu_heap": self.heap,
            "cpu_huge_pages": self.huge_pages,
            "cpu_malloc": self.malloc,
            "memory": memory_method(self.setup.device, self.memory_mode),
            "targets": {"time_ratio": TARGET_TIME_RATIO, "memory_ratio": TARGET_MEMORY_RATIO},
            "methods": methods,
            "cross_check": self.cross_check,
            "noise": self.noise,
            "norms": self.norms,
        }


def run_bench(
    setup: BenchSetup,
    methods: list[str],
    rounds: int = 5,
    warmup: int = 1,
    threads: int = 1,
    memory: str = "live",
    heap: str = "kept",
) -> BenchResult:
    setup.settings()  # bad names and sizes fail before anything runs
    names = ["nonprivate"] + [name for name in dict.fromkeys(methods) if name != "nonprivate"]
    for name in names:
        if name not in METHOD_CLASSES:
            raise DpvipInputError(f"method '{name}' is not one of {', '.join(METHODS)}")
    if rounds < 1 or warmup < 0:
        raise DpvipInputError(f"rounds {rounds} must be positive and warm-up {warmup} not negative")
    if memory not in MEMORY_MODES:
        raise DpvipInputError(f"memory mode '{memory}' is not one of {', '.join(MEMORY_MODES)}")
    check_heap_mode(heap)
    if setup.device.startswith("cuda") and not torch.cuda.is_available():
        raise DpvipInputError(f"device {setup.device} is not available")
    torch.set_num_threads(threads)
    with warnings.catch_warnings():
        for message in EXPECTED_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        if setup.device.startswith("cuda"):
            peak = cuda_peak_growth(names, setup)
            methods, images, noise = make_methods(names, setup)
            runners = {name: LocalRunner(method, images, noise) for name, method in methods.items()}
        else:  # this process computes nothing: it forks and commands
            peak = cpu_peak_growth(names, setup, threads, memory)
            runners = {}
            try:
                for name in names:
                    runners[name] = ProcessRunner(name, setup, threads, heap)
            except BaseException:
                for runner in runners.values():
                    runner.close()
                raise
        try:
            checked = cross_check(runners)  # before any step: every copy of the model still equal
            samples = time_methods(runners, rounds, warmup)
        finally:
            for runner in runners.values():
                runner.close()
    # timed here once the timed processes are gone (this process then computes)
    shares = {"noise": time_noise(setup, rounds), "norms": time_norms(setup, rounds) if "ours" in names else {}}
    return BenchResult(setup, threads, rounds, warmup, samples, peak, checked, memory, heap, **shares)


def _spread(ratios: list[float]) -> str:
    return f"{min(ratios):.2f}x / {statistics.median(ratios):.2f}x / {max(ratios):.2f}x"


def _shares_of_ours(result: BenchResult) -> list[str]:
    """What the noise and the per-example norms, each timed alone, are of ours' step, and what
    ours' step less both is against the non-private step (the clipped sums' extra over the
    weight gradients and the clipper's bookkeeping; where per-example gradients are formed,
    their work is in the norms' and takes the place of the weight gradients'). The norms
    timed alone read inputs that a step would have in cache: what is left can come out
    below 1."""
    ours, noise, norms, lines = result.median("ours"), result.noise, result.norms, []
    if noise:
        lines.append(
            f"of which the noise, once per step whatever the batch ({noise['parameters']:,} parameters, "
            f"4 draws each): {noise['seconds']:.4f} s = {noise['seconds'] / ours:.0%} of ours' step"
        )
    if norms:
        lines.append(
            f"of which the per-example norms ({norms['layers']} layers' norm rules timed alone on the first "
            f"micro-batch's inputs, times {norms['micro_batches']} micro-batch(es)): {norms['seconds']:.4f} s = "
            f"{norms['seconds'] / ours:.0%} of ours' step"
        )
    if noise and norms:
        rest = ours - noise["seconds"] - norms["seconds"]
        lines.append(
            f"ours' step less the noise and the norms: {rest / result.median('nonprivate'):.2f}x the non-private step"
        )
    return lines


def format_result(result: BenchResult) -> str:
    s = result.setup
    lines = [
        f"DP training step, MAE {s.model} {s.image_size} px patch {s.patch_size}, batch {s.batch}"
        + (f" in micro-batches of {s.micro_batch} (every method)" if s.micro_batch else "")
        + f", {s.device}, {s.precision}, {result.threads} thread(s), torch {result.torch_version}",
        f"AdamW; DP: flat L2 clip C={CLIP_NORM}, noise multiplier {NOISE_MULTIPLIER}; ours is dpvip's DPStep itself.",
        f"time: median of {result.rounds} round-robin rounds (order rotated per round) "
        f"after {result.warmup} warm-up step(s) per method, "
        + ("in this process" if s.device.startswith("cuda") else "each method in its own forked process")
        + "; wall (s/step) and process CPU time (CPU s)",
        f"memory: {memory_method(s.device, result.memory_mode)}",
    ]
    if not s.device.startswith("cuda"):
        lines.append(
            f"heap of the timed processes: {heap_description(result.heap)}; glibc tunables at start: "
            f"{result.malloc}; tensors >= 2 MB on transparent huge pages ({HUGE_PAGES_VARIABLE}): "
            + ("on" if result.huge_pages else "off")
            + " (page faults are a large, variable share of a CPU step; a GPU's caching allocator has none)"
        )
    lines += [
        f"targets: ours <= {TARGET_TIME_RATIO:.2f}x time, <= {TARGET_MEMORY_RATIO:.2f}x memory of nonprivate",
        "",
        f"{'method':<14} {'s/step':>9} {'images/s':>9} {'time':>7} {'CPU s':>8} {'CPU':>7} {'peak MB':>9} "
        f"{'memory':>7}",
    ]

    def ratio_text(ratio: float | None) -> str:
        return f"{ratio:6.2f}x" if ratio is not None else f"{'n/a':>7}"

    for name in result.samples:
        peak, cpu = result.peak_bytes.get(name), result.cpu_median(name)
        peak_text = f"{peak / 2**20:9.1f}" if peak is not None else f"{'n/a':>9}"
        cpu_text = f"{cpu:8.4f}" if cpu is not None else f"{'n/a':>8}"
        lines.append(
            f"{name:<14} {result.median(name):9.4f} {s.batch / result.median(name):9.1f} "
            f"{result.time_ratio(name):6.2f}x "
            f"{cpu_text} {ratio_text(result.cpu_time_ratio(name))}"
            f" {peak_text} {ratio_text(result.memory_ratio(name))}"
        )
    private = [name for name in result.samples if name != "nonprivate"]
    if private and result.rounds > 1:
        lines.append("per round, against the non-private step of the same round (min / median / max):")
        for name in private:
            text = f"  {name:<14} wall {_spread(result.round_ratios(name))}"
            if result.cpu_median(name) is not None:
                text += f", CPU {_spread(result.round_ratios(name, 'cpu_seconds'))}"
            lines.append(text)
    if "ours" in result.samples:
        lines += _shares_of_ours(result)
    if result.cross_check:
        reference = result.cross_check["reference"]
        lines.append("")
        lines.append(f"clipped sums (no noise) vs {reference}, max relative difference:")
        for name, value in result.cross_check.items():
            if name != "reference":
                lines.append(f"  {name:<14} {value:.2e}")
    return "\n".join(lines)
