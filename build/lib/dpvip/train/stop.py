"""A clean stop on SIGTERM, shared by every training loop (no torch needed)."""

from __future__ import annotations

import contextlib
import signal


class StopRequest:
    """Turns SIGTERM (Slurm time limit, preemption) into a checkpoint and a clean stop."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        with contextlib.suppress(ValueError):  # not the main thread: no handler
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum, frame):
        self.requested = True

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
