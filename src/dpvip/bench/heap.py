"""glibc heap settings for the processes of `dpvip bench dp-step`, set with mallopt at run
time (GLIBC_TUNABLES is read only at process start, before the forked timing processes
exist).

On CPU a step's time depends on the heap: with glibc's defaults, freed memory at the top of
the heap is handed back to the system and large blocks are unmapped when freed, so every
step touches gigabytes anew, page by page (1.3-1.6 million minor page faults per step of
ViP-Base at micro-batch 32; how many varies between runs and between methods). Timing modes:
- `kept` (default): trimming off and no block mmapped, whatever its size, so freed memory
  stays with the process and is reused, as a GPU's caching allocator keeps it: after a
  warm-up step, steps fault no page in. (Until 2026-11-29 the mmap threshold was only fixed at
  32 MiB, glibc's largest: larger blocks were still mmapped and unmapped, and a ViP-Base step
  of one micro-batch of 32 faulted 0.41 million pages in, the DP step 0.48 million.)
- `default`: glibc as the process found it (GLIBC_TUNABLES included).
"""

from __future__ import annotations

import ctypes
import ctypes.util

from dpvip.errors import DpvipInputError

HEAP_MODES = ("kept", "default")
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4  # mallopt parameters (malloc.h)
NO_TRIMMING = -1  # mallopt(M_TRIM_THRESHOLD, -1) turns trimming off
NO_MMAP = 0  # mallopt(M_MMAP_MAX, 0): no block is mmapped, every one comes from (and returns to) the heap


def mallopt(parameter: int, value: int) -> bool:
    """glibc's mallopt; False where it is not available (another C library)."""
    try:
        return bool(ctypes.CDLL(ctypes.util.find_library("c")).mallopt(parameter, value))
    except (OSError, AttributeError, TypeError):
        return False


def check_heap_mode(mode: str) -> None:
    if mode not in HEAP_MODES:
        raise DpvipInputError(f"heap mode '{mode}' is not one of {', '.join(HEAP_MODES)}")


def set_heap(mode: str) -> None:
    """Applies a timing mode to this process (before it allocates its model)."""
    check_heap_mode(mode)
    if mode == "kept" and not (mallopt(M_TRIM_THRESHOLD, NO_TRIMMING) and mallopt(M_MMAP_MAX, NO_MMAP)):
        raise DpvipInputError("heap mode 'kept' needs glibc's mallopt; use --heap default")


def heap_description(mode: str) -> str:
    if mode == "kept":
        return "kept (glibc trimming off, no block mmapped: freed memory is reused)"
    return "glibc defaults"
