"""A disk memo for pure functions that are slow to compute or slow to import for: their
answers are shared by every job of a run and by later runs (`joblib.Memory`).

- Accounting: calibrating a noise multiplier takes 5-10 CPU seconds (opacus' RDP at 99
  fractional orders, then PRV or PLD root finding), and a workflow asks for the same few
  calibrations many times: 24 DP-RandP runs share 2 budgets, the privacy audit repeats the
  training jobs' calibrations, a transfer study trains many heads on one mechanism.
- The digits stand-in: importing scikit-learn to load it costs a job 3 s.

Each store's folder is keyed by a fingerprint of the code that computes its answers (the
named sources of this package and the versions of the named libraries), so a change to
any of them starts a new folder instead of returning a stale answer. The stores hold
public numbers and public data only.

Where: ``$DPVIP_MEMO`` if set (``off`` turns the memo off), else ``$XDG_CACHE_HOME/dpvip``
(``~/.cache/dpvip`` without XDG_CACHE_HOME). A folder that cannot be created turns the
store off with a warning; answers are then computed each time.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import warnings
from importlib.metadata import version
from pathlib import Path

ENVIRONMENT = "DPVIP_MEMO"
PACKAGE = Path(__file__).parent


@functools.lru_cache(maxsize=None)
def fingerprint(sources: tuple[str, ...], libraries: tuple[str, ...]) -> str:
    """Hash of `sources` (paths under the dpvip package) and `libraries`' versions."""
    digest = hashlib.sha256()
    for name in sources:
        digest.update((PACKAGE / name).read_bytes())
    for library in libraries:
        digest.update(f"{library}=={version(library)}".encode())
    return digest.hexdigest()[:16]


def memo_root() -> Path | None:
    """The memo's base folder, or None when it is turned off."""
    chosen = os.environ.get(ENVIRONMENT)
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dpvip"


@functools.lru_cache(maxsize=None)
def _memory(store: str, key: str):
    root = memo_root()
    if root is None:
        return None
    location = root / store / key
    try:
        location.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        warnings.warn(f"{store} memo off: cannot create {location} ({err}); set {ENVIRONMENT}", stacklevel=4)
        return None
    import joblib  # only the jobs that miss their in-process answers pay for it

    return joblib.Memory(location, verbose=0)


def memoised(store: str, sources: tuple[str, ...], libraries: tuple[str, ...]):
    """Decorator: the function's answers are kept on disk in `store` (and in the process).
    Its arguments must be hashable: numbers, strings, tuples and frozen dataclasses."""

    def decorate(function):
        signature = inspect.signature(function)

        @functools.lru_cache(maxsize=512)
        def call(*args):
            memory = _memory(store, fingerprint(sources, libraries))
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

    return decorate
