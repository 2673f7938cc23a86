"""Timing the methods of `dpvip bench dp-step`: runners that step one method on command,
in this process (`LocalRunner`, CUDA) or in its own forked process (`ProcessRunner`, CPU),
the cross-check of their clipped sums, and the round-robin timing.

Before timing, the clipped sums (noise off) of every DP method on the batch, taken micro-
batch by micro-batch as the steps take it, are compared with those of the first one (`ours`
by default): the largest per-parameter
max |difference| / max |reference| is reported (fp32: ~1e-6).

Time: warm-up steps of every method, then R rounds; each round steps every method once,
in an order rotated every round, so that load drift on a shared machine hits all methods
alike. On CPU every method lives in its own forked process, which builds the same model and
batch and steps when the parent says so (one process at a time; the step is timed inside
it). Each method thus has its own heap (set as `heap` says), as in a training process that
runs it alone: in one shared process the big temporaries of one method raise glibc's mmap
threshold for the others and change their page faults and time. Per step: wall seconds,
process CPU seconds (user + system, page faults included; time spent waiting for a core
while other jobs run counts in wall time only) and minor page faults.

`_serve` runs in the child processes: it stays a module-level function.
"""

from __future__ import annotations

import multiprocessing
import resource
import time

import torch

from dpvip.errors import DpvipInputError
from dpvip.bench.heap import set_heap
from dpvip.bench.methods import METHOD_CLASSES, BenchSetup, Method, make_methods, max_relative_difference


def _synchronise(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _timed_step(method: Method, images: torch.Tensor, noise: torch.Tensor) -> tuple[float, float, int]:
    """(wall seconds, process CPU seconds, minor page faults) of one step."""
    device = method.setup.device
    _synchronise(device)
    began, cpu_began, faults = time.perf_counter(), time.process_time(), _minor_faults()
    method.step(images, noise)
    _synchronise(device)
    return time.perf_counter() - began, time.process_time() - cpu_began, _minor_faults() - faults


class LocalRunner:
    """A method stepping in this process."""

    def __init__(self, method: Method, images: torch.Tensor, noise: torch.Tensor):
        self.name, self.private = method.name, method.private
        self.method, self.images, self.noise = method, images, noise

    def clipped_sum(self) -> list[torch.Tensor]:
        return self.method.batch_clipped_sum(self.images, self.noise)

    def timed_step(self) -> tuple[float, float, int]:
        return _timed_step(self.method, self.images, self.noise)

    def close(self) -> None:
        pass


def _serve(name: str, setup: BenchSetup, threads: int, heap: str, connection) -> None:
    """A forked process: set its heap (`heap.HEAP_MODES`), build the method, then answer the
    parent's commands."""
    try:
        set_heap(heap)
        torch.set_num_threads(threads)
        methods, images, noise = make_methods([name], setup)
        method = methods[name]
        connection.send((True, None))
        while True:
            command = connection.recv()
            if command == "stop":
                return
            answer = (
                method.batch_clipped_sum(images, noise)
                if command == "clipped_sum"
                else _timed_step(method, images, noise)
            )
            connection.send((True, answer))
    except BaseException as err:  # the parent raises it
        connection.send((False, f"{type(err).__name__}: {err}"))


class ProcessRunner:
    """A method stepping in its own forked process, one step at a time on command: its own
    heap, as in a training process running that method alone, while the parent still
    alternates the methods round-robin. Fork before this process runs torch computations."""

    def __init__(self, name: str, setup: BenchSetup, threads: int, heap: str = "kept"):
        context = multiprocessing.get_context("fork")
        self.name, self.private = name, METHOD_CLASSES[name].private
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(name, setup, threads, heap, child), daemon=True)
        self.process.start()
        child.close()
        self._answer()  # built

    def _answer(self):
        try:
            ok, value = self.connection.recv()
        except EOFError:
            self.process.join()
            raise RuntimeError(f"the {self.name} process died (exit code {self.process.exitcode})") from None
        if not ok:
            if value.startswith("DpvipInputError: "):
                raise DpvipInputError(value.removeprefix("DpvipInputError: "))
            raise RuntimeError(f"{self.name}: {value}")
        return value

    def clipped_sum(self) -> list[torch.Tensor]:
        self.connection.send("clipped_sum")
        return self._answer()

    def timed_step(self) -> tuple[float, float, int]:
        self.connection.send("step")
        return self._answer()

    def close(self) -> None:
        try:
            self.connection.send("stop")
        except OSError:  # the process has already ended
            pass
        self.process.join()
        self.connection.close()


def cross_check(runners: dict) -> dict:
    """Clipped sums (no noise, the whole batch by micro-batches) of every DP method against the
    first one's."""
    private = [runner for runner in runners.values() if runner.private]
    if len(private) < 2:
        return {}
    reference = private[0].clipped_sum()
    return {"reference": private[0].name} | {
        r.name: max_relative_difference(r.clipped_sum(), reference) for r in private[1:]
    }


def time_methods(runners: dict, rounds: int, warmup: int) -> dict[str, dict[str, list]]:
    """Per method: wall seconds, process CPU seconds and minor page faults of each timed step."""
    for runner in runners.values():
        for _ in range(warmup):
            runner.timed_step()
    samples = {name: {"seconds": [], "cpu_seconds": [], "minor_faults": []} for name in runners}
    names = list(runners)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            wall, cpu, faults = runners[name].timed_step()
            samples[name]["seconds"].append(wall)
            samples[name]["cpu_seconds"].append(cpu)
            samples[name]["minor_faults"].append(faults)
    return samples
