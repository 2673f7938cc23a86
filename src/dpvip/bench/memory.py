"""Peak memory of the methods of `dpvip bench dp-step`: the growth over the first steps of a
freshly built model and optimizer (activations, gradients, per-example state, AdamW state),
not the model and data themselves. Every method first takes one step on a one-example copy,
so that one-off library set-up (kernels, thread-local buffers, lazy imports) is not counted.

On CUDA (`cuda_peak_growth`): max_memory_allocated minus memory_allocated before the steps,
per method in turn. On CPU (`cpu_peak_growth`): each method runs in its own forked child of
a process that has only imported (no tensors yet, so it is equivalent to a fresh process
without paying ~5 s of imports again); the child builds the model and data, resets the
kernel's peak-RSS mark (writing 5 to /proc/self/clear_refs), runs the steps and reports
VmHWM (peak resident set) minus VmRSS before the steps. Two CPU modes:
- `live` (default): the child first fixes glibc's mmap threshold at 128 KiB (mallopt), so
  every tensor of that size or more is returned to the system when freed; the peak RSS
  growth is then close to the peak of live tensor bytes, as CUDA's statistics count it.
- `rss`: glibc's defaults, which keep freed memory and fragment; what the RSS of a real
  training process shows, allocator slack included (and so less stable between methods).
Without /proc (not Linux), CPU memory is not measured. `memory_method` describes the
measurement in words.

`_cpu_peak_growth` runs in the child processes: it stays a module-level function.
"""

from __future__ import annotations

import multiprocessing
import re
from dataclasses import replace

import torch

from dpvip.errors import DpvipInputError
from dpvip.bench.heap import M_MMAP_THRESHOLD, mallopt
from dpvip.bench.methods import BenchSetup, make_methods

MEMORY_STEPS = 2  # steps of a fresh model and optimizer over which peak memory grows
MEMORY_MODES = ("live", "rss")
LIVE_MMAP_THRESHOLD = 128 * 1024  # bytes


def _status_kb(field_name: str) -> int:
    with open("/proc/self/status") as status:
        return int(re.search(rf"^{field_name}:\s+(\d+) kB", status.read(), re.MULTILINE).group(1))


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # resets VmHWM to the current resident set
        return True
    except OSError:
        return False


def _fix_mmap_threshold() -> bool:
    """glibc: allocations of LIVE_MMAP_THRESHOLD or more are mmapped, and unmapped when freed."""
    return mallopt(M_MMAP_THRESHOLD, LIVE_MMAP_THRESHOLD)


def _prewarm(name: str, setup: BenchSetup) -> None:
    """One step of the method on a one-example copy: library set-up is then not counted."""
    methods, images, noise = make_methods([name], replace(setup, batch=1, micro_batch=None))
    methods[name].step(images, noise)


def _cpu_peak_growth(name: str, setup: BenchSetup, threads: int, mode: str, results) -> None:
    """In a child process: build, reset the peak mark, step, report the peak growth (bytes)."""
    try:
        torch.set_num_threads(threads)
        if mode == "live" and not _fix_mmap_threshold():
            raise DpvipInputError("memory mode 'live' needs glibc's mallopt; use --memory rss")
        _prewarm(name, setup)
        methods, images, noise = make_methods([name], setup)
        before = _status_kb("VmRSS")
        if not _reset_peak_rss():
            results.put((name, None))
            return
        for _ in range(MEMORY_STEPS):
            methods[name].step(images, noise)
        results.put((name, (_status_kb("VmHWM") - before) * 1024))
    except BaseException as err:  # reported by the parent
        results.put((name, err))


def cpu_peak_growth(names: list[str], setup: BenchSetup, threads: int, mode: str = "live") -> dict[str, int | None]:
    """Peak resident-set growth per method, each in its own forked child, one at a time.
    Call before this process has run any torch computation (forking is safe then)."""
    if mode not in MEMORY_MODES:
        raise DpvipInputError(f"memory mode '{mode}' is not one of {', '.join(MEMORY_MODES)}")
    try:
        open("/proc/self/status").close()
    except OSError:
        return {name: None for name in names}
    context = multiprocessing.get_context("fork")
    growth = {}
    for name in names:
        results = context.SimpleQueue()
        child = context.Process(target=_cpu_peak_growth, args=(name, setup, threads, mode, results))
        child.start()
        got, value = results.get()
        child.join()
        if isinstance(value, BaseException):
            raise value
        growth[got] = value
    return growth


def cuda_peak_growth(names: list[str], setup: BenchSetup) -> dict[str, int]:
    growth = {}
    for name in names:
        _prewarm(name, setup)
        methods, images, noise = make_methods([name], setup)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        for _ in range(MEMORY_STEPS):
            methods[name].step(images, noise)
        torch.cuda.synchronize()
        growth[name] = torch.cuda.max_memory_allocated() - before
        del methods, images, noise
        torch.cuda.empty_cache()
    return growth


def memory_method(device: str, mode: str = "live") -> str:
    first = f"over {MEMORY_STEPS} steps of a fresh model and AdamW (after one step on a one-example copy)"
    if device.startswith("cuda"):
        return f"CUDA max_memory_allocated {first} minus memory_allocated before them"
    allocator = (
        f"glibc mmap threshold fixed at {LIVE_MMAP_THRESHOLD // 1024} KiB, so freed tensors leave the RSS"
        if mode == "live"
        else "glibc defaults, allocator slack included"
    )
    return (
        f"peak RSS (VmHWM, reset via /proc/self/clear_refs) {first} minus RSS before them, "
        f"one forked child per method; {allocator}"
    )
