"""Seeds as pure functions of integer keys (numpy SeedSequence), shared by the synthetic
generators (per image, program, network) and training (per epoch, per sample)."""

from __future__ import annotations

import numpy as np


def derive(*keys: int) -> int:
    """A 63-bit seed (torch generators take signed 64-bit) from integer keys."""
    return int(np.random.SeedSequence(list(keys)).generate_state(1, np.uint64)[0] >> np.uint64(1))
