"""Send a job's output (prints, warnings, progress bars, logging) to its log file."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from dpvip.errors import DpvipInputError, one_line

# The line `dpvip bench workflow` reads to tell a job's start-up (interpreter, imports,
# unpickling Snakemake's job object) from its work.
STARTUP_PREFIX = "start-up:"
# The last line of a finished job's log: its exact peak resident memory, which the smoke table
# (`dpvip.report.jobs.smoke`) prefers to the benchmark's `max_rss`, sampled only every 30 s after 15 s.
PEAK_RSS_PREFIX = "peak RSS:"


def seconds_since_process_start() -> float | None:
    """Wall seconds since this process was created, or None where psutil cannot tell."""
    try:
        import psutil

        return max(0.0, time.time() - psutil.Process().create_time())
    except Exception:  # noqa: BLE001 - a missing measurement must never fail a job
        return None


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
        startup = seconds_since_process_start()
        if startup is not None:  # straight to the file: other handlers on the root may echo to the terminal
            handle.write(f"{STARTUP_PREFIX} {startup:.2f} s from process start to the job's first line\n")
        try:
            yield
        except DpvipInputError as err:  # the user's input to fix, not a bug: one line, no traceback
            logging.error("job failed: %s", one_line(err))
            raise
        except BaseException:
            logging.exception("job failed")
            raise
        finally:
            root.removeHandler(handler)


def peak_rss_mb() -> float | None:
    """The largest resident set (MB) this process or any child it waited for (torchrun's
    workers) has had: the kernel's high-water mark, not a sample. None where neither /proc
    nor getrusage is there.

    This process's own mark is /proc's VmHWM where there is one: getrusage's ru_maxrss keeps,
    across fork and exec, the parent's resident set at the fork (Snakemake's, a few hundred
    MB), so it would report that for every small job. A child's mark can hold this process's
    resident set at its fork, which is at most this process's own mark."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return _vm_hwm_mb()
    to_mb = 1 / 2**20 if sys.platform == "darwin" else 1 / 2**10  # ru_maxrss: bytes on macOS, KiB on Linux
    own = _vm_hwm_mb() or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * to_mb
    return max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * to_mb)


def _vm_hwm_mb() -> float | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return float(line.split()[1]) / 2**10  # kB
    except OSError:
        pass
    return None


def exit_now() -> None:
    """End the process with status 0 at once, skipping the interpreter's teardown.

    Tearing down torch, torchvision and opacus (their destructors, dynamo's exit hooks,
    unloading the CUDA build's libraries) takes 1.5 s a process on 2 CPU cores, in every
    job of a workflow of 150. Only call it when the job's outputs are written and closed:
    the standard streams and logging are flushed here and the live temporary directories
    removed (`remove_temporary_directories`), nothing else is.
    """
    remove_temporary_directories()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def remove_temporary_directories() -> None:
    """Remove every live `tempfile.TemporaryDirectory`, whose removal `exit_now` would skip.
    wandb (which timm imports where it is installed: img2dataset needs it)
    makes two at import, so without this every job left two folders in the system's
    temporary directory: 6,658 after one `make test`. A scan of the live objects: 0.1 s in
    a job that imported torch, timm and opacus."""
    import gc
    import tempfile

    # type(), not isinstance: some live objects are lazy modules that warn when asked their class
    for item in gc.get_objects():
        if type(item) is tempfile.TemporaryDirectory:
            item.cleanup()


LIBRARY_VARIABLE = "DPVIP_SRC"  # set by the Snakefile (rules/common.smk): its checkout's src/


def run_jobs_with_library(src: str) -> None:
    """Make the jobs this process starts import the library in `src` (the Snakefile's
    checkout): first on their PYTHONPATH, and named for `check_library_copy`."""
    others = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path and path != src]
    os.environ["PYTHONPATH"] = os.pathsep.join([src, *others])
    os.environ[LIBRARY_VARIABLE] = src


def check_library_copy() -> None:
    """A job runs the library of the checkout its Snakefile comes from: another copy (an
    installed dpvip, another checkout) stops it in one line naming both."""
    expected = os.environ.get(LIBRARY_VARIABLE)
    if not expected:  # not started by the workflow
        return
    imported, wanted = Path(__file__).resolve().parent, (Path(expected) / "dpvip").resolve()
    if imported != wanted:
        raise DpvipInputError(
            f"this job imported dpvip from {imported}, but its Snakefile comes with {wanted}: "
            f"put {expected} first on PYTHONPATH, or run the Snakefile of the copy you mean"
        )


@contextlib.contextmanager
def workflow_job(log: str | Path) -> Iterator[None]:
    """The body of a workflow script: its output goes to `log` (`logging_to`); when the
    body returns, the process ends without teardown (`exit_now`). A bad input
    (DpvipInputError) ends it with status 2 and one line in the log and on stderr; any
    other exception is logged and ends it the usual way, with its traceback."""
    try:
        with logging_to(log):
            check_library_copy()
            yield
            peak = peak_rss_mb()
            if peak is not None:
                print(f"{PEAK_RSS_PREFIX} {peak:.1f} MB, the job's largest process (high-water mark)")
    except DpvipInputError as err:
        # Snakemake shows the job's stderr: a bad input (a corrupt shard, a missing folder)
        # is one line there and in the log, not a traceback through the library.
        print(f"error: {one_line(err)}", file=sys.stderr)
        sys.exit(2)
    exit_now()
