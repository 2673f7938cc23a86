"""Send a job's output (prints, warnings, progress bars, logging) to its log file."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def logging_to(path: str | Path) -> Iterator[None]:
    """Within the block, stdout, stderr and the `logging` root write to `path`.

    An exception is written to the log as well, then re-raised so the job fails.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", buffering=1) as handle, contextlib.redirect_stdout(handle), contextlib.redirect_stderr(handle):
        handler = logging.StreamHandler(handle)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        try:
            yield
        except BaseException:
            logging.exception("job failed")
            raise
        finally:
            root.removeHandler(handler)
