"""`dpvip bench dp-ops`: how many operations the host issues in a training step, each
method against the non-private step. On a GPU, a step whose device work per operation is
small is bound by the host (Python, dispatch and the launch of each kernel: about 40 us an
operation for ViP-Base's DP step on an H200, docs/measurements.md), so there fewer
operations are a shorter step, which a CPU's timing cannot show.

Counted: every aten operation dispatched in one step (after an uncounted warm-up step),
except those that launch no work (views, `empty`, `detach`), and each launch of the fused
ghost norm (a Triton kernel, not an aten operation; the CUDA noise kernel, one a step, is
not counted). With `gpu_path`, a CPU counts the path a CUDA device takes: 16-bit matrix
products into float32 (`out_dtype`, and added in place by `addmm`: one operation each; the
CPU has no kernel for them, so they are computed widened, uncounted), the fused ghost norm
(its values from the batched products, uncounted), float32 Grams whole (not in blocks) and
AdamW's foreach update. The noise
stays the CPU's (a keyed mt19937: a few operations a step).
"""

from __future__ import annotations

import collections
import contextlib
import functools
from dataclasses import dataclass
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from dpvip.bench.methods import BenchSetup, make_methods

NOT_LAUNCHING = {"empty", "empty_strided", "detach", "lift_fresh"}
# 16-bit products into float32: CUDA kernels that the CPU lacks (torch 2.14)
_FLOAT32_PRODUCTS = {
    torch.ops.aten.mm.dtype: torch.ops.aten.mm.default,
    torch.ops.aten.bmm.dtype: torch.ops.aten.bmm.default,
}


class OperationCounter(TorchDispatchMode):
    """Counts the launching aten operations dispatched while it is active, by name."""

    def __init__(self, emulate_float32_products: bool = False):
        super().__init__()
        self.counts: collections.Counter = collections.Counter()
        self.emulate = emulate_float32_products
        self.paused = False  # work done for a stand-in, not counted

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not (self.paused or func.is_view or func.__name__.split(".")[0] in NOT_LAUNCHING):
            self.counts[func.__name__] += 1
        if self.emulate and func in _FLOAT32_PRODUCTS:  # inside the mode: not counted again
            return _FLOAT32_PRODUCTS[func](*(arg.float() for arg in args[:2]))
        if self.emulate and func == torch.ops.aten.addmm.dtype_out:
            total, x, y = args[:3]
            scales = {key: kwargs[key] for key in ("beta", "alpha") if key in kwargs}
            return torch.ops.aten.addmm.out(total, x.float(), y.float(), **scales, out=kwargs["out"])
        return func(*args, **kwargs)

    def launched(self, name: str) -> None:
        """A kernel launched outside aten (Triton)."""
        self.counts[name] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class _FusedGhostStandIn:
    """`gram_kernel`'s kernel as `fused_ghost_tiles` launches it (`kernel[grid](...)`),
    for counting on a CPU: its values from the batched products, not counted."""

    def __init__(self, counter: OperationCounter):
        self.counter = counter

    def __getitem__(self, grid):
        return functools.partial(self._launch, grid)

    def _launch(self, grid, a, g, out, *args, **kwargs):
        from dpvip.privacy.fused_ghost import SMALLEST_TILE
        from dpvip.privacy.layer_rules import ghost_squared_norms
        from dpvip.privacy.rounding import token_norm_sum

        self.counter.paused = True
        try:
            _, blocks, _ = grid({"BLOCK_T": SMALLEST_TILE})
            out[:, :, : blocks * blocks] = 0  # the kernel writes every slot of its grid
            out[:, 0, 0] = ghost_squared_norms(a.float(), g.float(), wide=True)
            out[:, 1, 0] = token_norm_sum(a, g)[0].double()
        finally:
            self.counter.paused = False


@contextlib.contextmanager
def _counted_paths(counter: OperationCounter, optimizers: list, emulate: bool):
    """The fused ghost norm counted as one launch a call (Triton's launches are not aten
    operations); with `emulate`, the clipper's CUDA path on a CPU and AdamW's foreach update
    (CUDA's default; the CPU's is a loop over parameters)."""
    from dpvip.privacy import fused_ghost, layer_rules

    kernel = {"kernel": _FusedGhostStandIn(counter)} if emulate else {}

    def fused(a, g):
        counter.launched("triton.ghost_norm")
        return fused_ghost.fused_ghost_tiles(a, g, **kernel)

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(layer_rules, "fused_ghost_tiles", fused))
        if emulate:
            for optimizer in optimizers:
                for group in optimizer.param_groups:
                    group["foreach"] = True
            cuda_only = ("sixteen_bit_products_to_float32", "adds_sixteen_bit_products_in_place", "fused_ghost_runs_on")
            for name in cuda_only:
                stack.enter_context(mock.patch.object(layer_rules, name, lambda device: True))
            whole = functools.partial(layer_rules._gram_blocks, device_type="cuda")  # float32 Grams whole
            stack.enter_context(mock.patch.object(layer_rules, "_gram_blocks", whole))
        yield


@dataclass
class OperationCounts:
    setup: BenchSetup
    gpu_path: bool
    counts: dict[str, collections.Counter]  # method -> operation name -> count in one step

    def total(self, name: str) -> int:
        return sum(self.counts[name].values())

    def ratio(self, name: str) -> float:
        return self.total(name) / self.total("nonprivate")

    def added(self, name: str, top: int = 12) -> list[tuple[str, int]]:
        """Per operation name, the method's count less the non-private step's (those it adds
        most first; a negative count is one it needs fewer of)."""
        extra = self.counts[name].copy()
        extra.subtract(self.counts["nonprivate"])
        return [(op, n) for op, n in extra.most_common() if n][:top]

    def record(self) -> dict:
        return {"gpu_path": self.gpu_path, "device": self.setup.device, "precision": self.setup.precision} | {
            name: {"operations": self.total(name), "ratio": self.ratio(name), "by_name": dict(counts)}
            for name, counts in self.counts.items()
        }


def count_operations(setup: BenchSetup, methods: list[str], gpu_path: bool = False) -> OperationCounts:
    """Operations of one step of each method (after one uncounted step), in this process."""
    names = ["nonprivate"] + [name for name in dict.fromkeys(methods) if name != "nonprivate"]
    built, images, noise = make_methods(names, setup)
    emulate = gpu_path and not setup.device.startswith("cuda")
    counts = {}
    for name, method in built.items():
        counter = OperationCounter(emulate_float32_products=emulate)
        with _counted_paths(counter, [method.optimizer], emulate), counter:
            method.step(images, noise)  # the warm-up: first-use work (caches, lazy state) is not counted
            counter.counts.clear()
            method.step(images, noise)
        counts[name] = counter.counts
    return OperationCounts(setup, gpu_path, counts)


def format_counts(result: OperationCounts) -> str:
    s = result.setup
    path = "the CUDA path, counted on this CPU" if result.gpu_path and s.device == "cpu" else f"{s.device}'s path"
    lines = [
        f"operations a step (launching aten operations; views and allocations not counted), MAE {s.model} "
        f"{s.image_size} px patch {s.patch_size}, batch {s.batch}"
        + (f" in micro-batches of {s.micro_batch}" if s.micro_batch else "")
        + f", {s.precision}, {path}",
        "",
        f"{'method':<14} {'operations':>10} {'ratio':>7}",
    ]
    for name in result.counts:
        lines.append(f"{name:<14} {result.total(name):10,} {result.ratio(name):6.2f}x")
    for name in result.counts:
        if name != "nonprivate":
            added = ", ".join(f"{op} {n:+}" for op, n in result.added(name))
            lines.append(f"{name} against nonprivate: {added}")
    return "\n".join(lines)
