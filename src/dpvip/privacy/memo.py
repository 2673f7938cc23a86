"""A disk memo for the accountants, shared by every job of a run and by later runs.

Calibrating a noise multiplier takes 5-10 CPU seconds (opacus' RDP at 99 fractional orders,
then PRV or PLD root finding), and a workflow asks for the same few calibrations many
times: 24 DP-RandP runs share 2 budgets, the privacy audit repeats the training jobs'
calibrations, a transfer study trains many heads on one mechanism. Each answer is a pure
function of its numbers, so it is computed once and kept (`joblib.Memory`).

The memo folder is keyed by a fingerprint of the code that computes the answers (this
package's accounting sources and the versions of opacus, dp-accounting, scipy and numpy),
so a change to any of them starts a new folder instead of returning a stale number. It
holds public numbers only (sigma and epsilon for public settings), nothing about data.

Where: ``$DPVIP_ACCOUNTING_CACHE`` if set (``off`` disables the memo), else
``$XDG_CACHE_HOME/dpvip/accounting`` (``~/.cache`` without XDG_CACHE_HOME). A folder that
cannot be created disables the memo with a warning; answers are then computed each time.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import warnings
from importlib.metadata import version
from pathlib import Path

ENVIRONMENT = "DPVIP_ACCOUNTING_CACHE"
# The sources whose code decides an accountant's answer (the fingerprint covers them).
SOURCES = ("accounting.py", "gaussian.py")
LIBRARIES = ("opacus", "dp-accounting", "scipy", "numpy")


def fingerprint() -> str:
    """Hash of the accounting code and library versions: the memo's subfolder."""
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for name in SOURCES:
        digest.update((here / name).read_bytes())
    for library in LIBRARIES:
        digest.update(f"{library}=={version(library)}".encode())
    return digest.hexdigest()[:16]


def cache_root() -> Path | None:
    """The memo's base folder, or None when it is turned off."""
    chosen = os.environ.get(ENVIRONMENT)
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dpvip" / "accounting"


@functools.lru_cache(maxsize=1)
def _memory():
    root = cache_root()
    if root is None:
        return None
    location = root / fingerprint()
    try:
        location.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        warnings.warn(f"accounting memo off: cannot create {location} ({err}); set {ENVIRONMENT}", stacklevel=3)
        return None
    import joblib  # only the jobs that account pay for it

    return joblib.Memory(location, verbose=0)


def memoised(function):
    """`function`, with its answers kept on disk (in-process too). Arguments must be
    hashable numbers, strings and frozen dataclasses or tuples of them."""
    signature = inspect.signature(function)

    @functools.lru_cache(maxsize=512)
    def call(*args):
        memory = _memory()
        if memory is None:
            return function(*args)
        return memory.cache(function)(*args)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return call(*bound.args)

    wrapper.cache_clear = call.cache_clear
    return wrapper
