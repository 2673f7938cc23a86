"""A real single-node Slurm cluster on this machine, for the tests that submit through it.

munged (as user munge), slurmctld and slurmd run in the foreground as child processes with
a generated slurm.conf: one node with this machine's CPU count and memory, on loopback, no
accounting (so job states come from squeue), linuxproc process tracking and no task plugin
(nothing here needs cgroups). Everything lives under one folder: the config, state, spool
and daemon logs. `SLURM_CONF` in `env` points the clients (sbatch, srun, squeue, scancel)
and Snakemake's slurm executor at it; the config is also linked at Slurm's default
/etc/slurm/slurm.conf (when nothing is there), because slurmd starts batch scripts without
the submitter's SLURM_CONF and the `srun` inside a job then looks there.

`missing()` says why a cluster cannot be brought up (no Slurm installed and not root to
install it), for a skip with a stated reason; `make test` installs Debian's slurm-wlm and
munge when run as root.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scancel", "sinfo", "scontrol")
MEMORY_RESERVE_MB = 1024  # left to the system when telling Slurm the node's memory


def missing() -> str | None:
    """Why no cluster can be started here, or None."""
    absent = [name for name in (*DAEMONS, *CLIENTS) if not (shutil.which(name) or Path(f"/usr/sbin/{name}").exists())]
    if absent:
        return (
            f"Slurm is not installed ({', '.join(absent)} missing): "
            "`apt-get install slurm-wlm munge` as root, as `make test` does"
        )
    if os.geteuid() != 0:
        return "the test cluster runs slurmd, which needs root"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


class SlurmCluster:
    def __init__(self, root: Path, cpus: int | None = None):
        self.root = Path(root)
        # munged runs as user munge and must reach its socket: not inside a private (0700)
        # test folder, but in a folder of its own that every user can traverse.
        self.munge = Path(tempfile.mkdtemp(prefix="dpvip-munge-"))
        self.host = socket.gethostname()
        self.cpus = cpus or os.cpu_count() or 1
        self.conf = self.root / "slurm.conf"
        self.env = os.environ | {"SLURM_CONF": str(self.conf)}
        self._processes: list[subprocess.Popen] = []
        self._linked: Path | None = None

    def write_config(self) -> None:
        for folder in ("state", "spool"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        memory = max(1024, _memory_mb() - MEMORY_RESERVE_MB)
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=dpvip-test",
                    f"SlurmctldHost={self.host}(127.0.0.1)",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    "SlurmUser=root",
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={self.munge / 'munge.socket'}",
                    f"StateSaveLocation={self.root / 'state'}",
                    f"SlurmdSpoolDir={self.root / 'spool'}",
                    f"SlurmctldPidFile={self.root / 'slurmctld.pid'}",
                    f"SlurmdPidFile={self.root / 'slurmd.pid'}",
                    f"SlurmctldLogFile={self.root / 'slurmctld.log'}",
                    f"SlurmdLogFile={self.root / 'slurmd.log'}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core_Memory",
                    "AccountingStorageType=accounting_storage/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "JobCompType=jobcomp/none",
                    "MpiDefault=none",
                    "ReturnToService=2",
                    "MinJobAge=3600",  # finished jobs stay visible to squeue (no sacct here)
                    "KillWait=10",
                    f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={memory} State=UNKNOWN",
                    "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )

    def _start(self, *command: str, user: str | None = None) -> None:
        log = open(self.root / f"{Path(command[0]).name}.out", "ab")
        prefix = ["runuser", "-u", user, "--"] if user else []
        self._processes.append(
            subprocess.Popen([*prefix, *command], stdout=log, stderr=subprocess.STDOUT, env=self.env)
        )

    def _link_default_config(self) -> None:
        default = Path("/etc/slurm/slurm.conf")
        if default.is_symlink() and not default.exists():  # left by a killed test run
            default.unlink()
        if not default.exists():
            default.parent.mkdir(parents=True, exist_ok=True)
            default.symlink_to(self.conf)
            self._linked = default
        elif default.resolve() != self.conf.resolve():
            raise RuntimeError(f"{default} belongs to another Slurm: the test cluster will not replace it")

    def start(self, timeout: float = 60) -> None:
        self.write_config()
        self._link_default_config()
        socket_path = self.munge / "munge.socket"
        self.munge.chmod(0o755)
        shutil.chown(self.munge, "munge", "munge")
        self._start(
            "/usr/sbin/munged",
            "--foreground",
            f"--socket={socket_path}",
            f"--pid-file={self.munge / 'munged.pid'}",
            f"--seed-file={self.munge / 'seed'}",
            "--force",
            user="munge",
        )
        self._wait(lambda: socket_path.exists(), timeout, "munged did not start")
        self._start("/usr/sbin/slurmctld", "-D", "-i", "-f", str(self.conf))
        self._start("/usr/sbin/slurmd", "-D", "-f", str(self.conf))
        self._wait(self.idle, timeout, "the node did not become idle")

    def idle(self) -> bool:
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, env=self.env)
        return done.returncode == 0 and done.stdout.strip() == "idle"

    def _wait(self, ready, timeout: float, message: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            if any(process.poll() is not None for process in self._processes):
                break
            time.sleep(0.5)
        self.stop()
        logs = "\n".join(
            f"--- {path.name}\n{path.read_text()[-2000:]}"
            for path in sorted(self.root.glob("*.log")) + sorted(self.root.glob("*.out"))
        )
        raise RuntimeError(f"{message} within {timeout} s\n{logs}")

    def run(self, *command: str, **kwargs) -> subprocess.CompletedProcess:
        """A client command against this cluster."""
        return subprocess.run(command, capture_output=True, text=True, env=self.env, **kwargs)

    def stop(self) -> None:
        for process in reversed(self._processes):
            if process.poll() is None:
                process.terminate()
        for process in reversed(self._processes):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        self._processes = []
        if self._linked is not None and self._linked.is_symlink():
            self._linked.unlink()
        self._linked = None
        shutil.rmtree(self.munge, ignore_errors=True)
