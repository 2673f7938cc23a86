"""Run a training command in this process, or as `nproc` processes under torchrun.

On one node torchrun runs standalone (its own rendezvous); jobs then see RANK, WORLD_SIZE
and LOCAL_RANK and join the process group (`dpvip.train.distributed`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dpvip


def torchrun_command(nproc: int, cli_args: list[str]) -> list[str]:
    """`python -m torch.distributed.run --standalone --nproc_per_node N -m dpvip.cli ARGS`."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", "-m", "dpvip.cli", *cli_args]


def run_torchrun(nproc: int, cli_args: list[str]) -> None:
    """Run `dpvip ARGS` as `nproc` processes; output goes to this process's stdout/stderr.
    The checkout's library comes first on PYTHONPATH, so workflow jobs use the same code."""
    source = str(Path(dpvip.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")])))
    process = subprocess.run(torchrun_command(nproc, cli_args), env=env, stdout=sys.stdout, stderr=sys.stderr)
    if process.returncode:
        raise RuntimeError(f"torchrun with {nproc} processes exited with status {process.returncode}")


def run_torchrun_with_settings(nproc: int, command: list[str], run_dir: str | Path, values: dict, arguments: list[str]) -> None:
    """`dpvip COMMAND --settings RUN_DIR/settings.yaml ARGUMENTS` as `nproc` processes: a
    workflow job's settings travel to the ranks as a file in the run folder."""
    import yaml

    settings_file = Path(run_dir) / "settings.yaml"
    settings_file.parent.mkdir(parents=True, exist_ok=True)
    settings_file.write_text(yaml.safe_dump(dict(values)))
    run_torchrun(nproc, [*command, "--settings", str(settings_file), *arguments])
