"""Run a training command in this process, or as `nproc` processes per node under torchrun.

Outside Slurm torchrun runs standalone on this node (its own rendezvous). Inside a Slurm job
`srun` starts one task per node of the allocation, each a torchrun of `nproc` processes, and
they meet at a c10d rendezvous on the allocation's first node, port and id taken from the
job: in the batch script of a multi-node (MPI-style) job, and inside the job step that the
slurm executor wraps a one-node job in (then with `--overlap`, sharing that step's CPUs and
GPUs). Either way the processes see RANK, WORLD_SIZE and LOCAL_RANK and join the process
group (`dpvip.train.distributed`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import dpvip

RENDEZVOUS_PORT = 29400  # plus the job id modulo 1000: two jobs sharing a node do not collide


@dataclass(frozen=True)
class SlurmRendezvous:
    nodes: int
    head: str  # the allocation's first node
    port: int
    job: str
    in_step: bool  # already inside a job step: the new step overlaps it


def slurm_rendezvous(env: dict) -> SlurmRendezvous | None:
    """The rendezvous of the Slurm job this process runs in; None outside Slurm."""
    job = env.get("SLURM_JOB_ID")
    if not job:
        return None
    listed = subprocess.run(
        ["scontrol", "show", "hostnames", env["SLURM_JOB_NODELIST"]], capture_output=True, text=True, check=True
    )
    nodes = int(env.get("SLURM_JOB_NUM_NODES", env.get("SLURM_NNODES", "1")))
    return SlurmRendezvous(
        nodes, listed.stdout.split()[0], RENDEZVOUS_PORT + int(job) % 1000, job, env.get("SLURM_STEP_ID") is not None
    )


def torchrun_command(nproc: int, cli_args: list[str], rendezvous: SlurmRendezvous | None = None) -> list[str]:
    """`python -m torch.distributed.run --standalone --nproc_per_node N -m dpvip.cli ARGS`, or
    under Slurm `srun` (one task per node) of that torchrun with a c10d rendezvous."""
    runner = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}"]
    if rendezvous is None:
        return [*runner, "--standalone", "-m", "dpvip.cli", *cli_args]
    r = rendezvous
    srun = [
        "srun",
        f"--nodes={r.nodes}",
        f"--ntasks={r.nodes}",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        *(["--overlap"] if r.in_step else []),
    ]
    rendezvous_args = [
        f"--nnodes={r.nodes}",
        "--rdzv_backend=c10d",
        f"--rdzv_endpoint={r.head}:{r.port}",
        f"--rdzv_id={r.job}",
    ]
    return [*srun, *runner, *rendezvous_args, "-m", "dpvip.cli", *cli_args]


def run_torchrun(nproc: int, cli_args: list[str]) -> None:
    """Run `dpvip ARGS` as `nproc` processes; output goes to this process's stdout/stderr.
    The checkout's library comes first on PYTHONPATH, so workflow jobs use the same code."""
    source = str(Path(dpvip.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")])))
    rendezvous = slurm_rendezvous(env)
    command = torchrun_command(nproc, cli_args, rendezvous)
    print("launching:", " ".join(command), file=sys.stderr, flush=True)
    # torchrun leaves its log folder (torchelastic_*) in the temporary directory: on this node
    # it gets one of its own, removed afterwards (under srun the other nodes have no such path)
    scratch = tempfile.TemporaryDirectory(prefix="torchrun-") if rendezvous is None else contextlib.nullcontext()
    with scratch as folder:
        if folder is not None:
            env["TMPDIR"] = folder
        process = subprocess.run(command, env=env, stdout=sys.stdout, stderr=sys.stderr)
    if process.returncode:
        raise RuntimeError(f"torchrun with {nproc} processes exited with status {process.returncode}")


def run_torchrun_with_settings(
    nproc: int, command: list[str], run_dir: str | Path, values: dict, arguments: list[str]
) -> None:
    """`dpvip COMMAND --settings RUN_DIR/settings.yaml ARGUMENTS` as `nproc` processes: a
    workflow job's settings travel to the ranks as a file in the run folder."""
    import yaml

    settings_file = Path(run_dir) / "settings.yaml"
    settings_file.parent.mkdir(parents=True, exist_ok=True)
    settings_file.write_text(yaml.safe_dump(dict(values)))
    run_torchrun(nproc, [*command, "--settings", str(settings_file), *arguments])
