"""Shared fixtures: the repository root, runners for the `dpvip` command line and for
Snakemake, a Slurm cluster, and the embedded default built once for the session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A real single-node Slurm cluster (munged, slurmctld, slurmd) for the session; skipped,
    with the reason, only where Slurm is not installed and cannot be (not root)."""
    from slurm_cluster import SlurmCluster, missing

    reason = missing()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session", autouse=True)
def key_store(tmp_path_factory) -> Path:
    """The tests' run keys in a key store of the session's (`DPVIP_KEY_DIR`), never the
    checkout's `.dpvip/keys` (a workflow run sets its own from `privacy.key_dir`). Keys are
    named by their runs' folders, which are each test's own."""
    store = tmp_path_factory.mktemp("keys") / "store"
    patch = pytest.MonkeyPatch()  # not a test's monkeypatch: a test's undo() keeps it
    patch.setenv("DPVIP_KEY_DIR", str(store))
    yield store
    patch.undo()


@pytest.fixture
def keep_keys(monkeypatch):
    """Keys kept once their runs end (privacy.keep_keys): a test gives one run's key to another."""
    monkeypatch.setenv("DPVIP_KEEP_KEYS", "true")


def share_key(source_work: Path, target_work: Path) -> None:
    """Give the run of private work folder `target_work` the secret key of `source_work`'s run
    (the same noise and batches: what a comparison of two secret runs needs)."""
    import shutil

    from dpvip.privacy.randomness import key_path

    from dpvip.privacy.randomness import key_store

    key_path(target_work).parent.mkdir(parents=True, exist_ok=True)
    os.chmod(key_store(), 0o700)  # a store must have mode 0700 (mkdir's parents get the default mode)
    shutil.copy2(key_path(source_work), key_path(target_work))


@pytest.fixture
def torch_one_thread():
    """Run a test on one torch thread (two spin-wait when another process holds a core)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def run_dpvip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dpvip.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=600
    )


def dpvip_json(*args: str) -> dict:
    done = run_dpvip(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def linear_paths(monkeypatch):
    """Spy on the Linear rule: layer -> the weight path taken ('ghost' or 'formed')."""
    seen = {}
    from dpvip.privacy import layer_rules

    original = layer_rules._linear_squared_norms

    def spy(layer, call):
        squared = original(layer, call)
        if "weight" in call.parts:
            seen[layer] = call.parts["weight"][0]
        return squared

    monkeypatch.setattr(layer_rules, "_linear_squared_norms", spy)
    return seen


def write_synthetic_index(
    out: Path, family: str, images: int, resolution: int, shard_size: int, seed: int = 0, options: dict | None = None
) -> Path:
    """Generate a small synthetic dataset's shards and index.json in `out`; returns the index."""
    from dpvip.files import write_json
    from dpvip.synthetic.shards import build_index, shard_name, write_shard
    from dpvip.synthetic.spec import DatasetSpec

    values = {
        "family": family,
        "images": images,
        "resolution": resolution,
        "shard_size": shard_size,
        "seed": seed,
        "options": options or {},
    }
    spec = DatasetSpec.from_config(family, values)
    paths = [Path(out) / shard_name(shard) for shard in range(spec.shards)]
    for shard, path in enumerate(paths):
        write_shard(spec, shard, path, progress=False)
    write_json(build_index(spec, paths), Path(out) / "index.json")
    return Path(out) / "index.json"


def snakemake_command(workdir: Path, *args: str) -> list[str]:
    """`python -m snakemake` on this checkout's Snakefile, run in `workdir`."""
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(ROOT / "Snakefile"),
        "--directory",
        str(workdir),
        *args,
    ]


def snakemake_env(workdir: Path, env: dict | None = None) -> dict:
    return (env or dict(os.environ)) | {"MPLCONFIGDIR": str(workdir / ".mpl"), "NO_ALBUMENTATIONS_UPDATE": "1"}


def run_snakemake(
    workdir: Path, *args: str, env: dict | None = None, timeout: int = 1800
) -> subprocess.CompletedProcess:
    """Run Snakemake there; `.output` is its stdout and stderr together."""
    done = subprocess.run(
        snakemake_command(workdir, *args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=snakemake_env(workdir, env),
    )
    done.output = done.stdout + done.stderr
    return done


def merged_config(*names: str) -> dict:
    """The workflow config as Snakemake sees it with `--configfile`: config/<name> files
    merged in order over each other, then validated (schema defaults filled in)."""
    import yaml
    from snakemake.utils import update_config

    from dpvip.config import validate_config

    config: dict = {}
    for name in names:
        update_config(config, yaml.safe_load((ROOT / "config" / name).read_text()))
    validate_config(config, ROOT / "config" / "schema.yaml")
    return config


def deterministic_tables(workdir: Path) -> dict[str, str]:
    """Every table's CSV under results/tables, without the columns that time the jobs."""
    import pandas as pd

    tables = {}
    for path in sorted((workdir / "results/tables").glob("*.csv")):
        frame = pd.read_csv(path)
        tables[path.name] = frame.drop(columns=[c for c in frame.columns if "second" in c]).to_csv(index=False)
    return tables


def shard_hashes(workdir: Path) -> dict[str, str]:
    """SHA-256 of every dataset shard and index under results/ (all are deterministic)."""
    from dpvip.files import sha256

    results = workdir / "results"
    return {
        str(p.relative_to(results)): sha256(p)
        for p in sorted(results.glob("*/*/shard-*.tar")) + sorted(results.glob("*/*/index.json"))
    }


def secret_keys(workdir: Path) -> list[Path]:
    """Every DP run's secret key in the working folder's key store (the default one)."""
    from dpvip.privacy.randomness import DEFAULT_KEY_DIR, KEY_SUFFIX

    return sorted((workdir / DEFAULT_KEY_DIR).rglob(f"*{KEY_SUFFIX}"))


def copy_secret_keys(source: Path, target: Path) -> int:
    """Give the runs under `target` the secret keys of the same runs under `source`: with the
    same key, a run draws the same noise and batches (what a comparison of two working folders
    of secret runs needs). Returns how many keys were copied."""
    import shutil

    from dpvip.privacy.randomness import DEFAULT_KEY_DIR

    keys = secret_keys(source)
    for key in keys:
        destination = target / key.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(key, destination)
    if keys:  # a store must have mode 0700 (mkdir's parents get the default mode)
        os.chmod(target / DEFAULT_KEY_DIR, 0o700)
    return len(keys)


# Runs compared byte for byte use seeded randomness (not private): the embedded default here,
# its reruns and the Slurm run of some of its tables.
SEEDED = ROOT / "tests/workflow/seeded.yaml"


@dataclass
class EmbeddedRun:
    """The embedded default as a user builds it, but seeded: one table alone, then
    everything. `tables` and `shards` are taken right after the full run, before any test
    changes the folder."""

    workdir: Path
    table: subprocess.CompletedProcess | None = None
    full: subprocess.CompletedProcess | None = None
    tables: dict[str, str] = field(default_factory=dict)
    shards: dict[str, str] = field(default_factory=dict)

    def snakemake(self, *args: str, configfiles: tuple = (), **options) -> subprocess.CompletedProcess:
        """Snakemake in this folder with its (seeded) config, and `configfiles` over it."""
        return run_snakemake(self.workdir, *args, "--configfile", str(SEEDED), *map(str, configfiles), **options)


@pytest.fixture(scope="session")
def embedded_default(tmp_path_factory) -> EmbeddedRun:
    """The whole embedded DAG, built once (15 min here) for the tests that check it and
    for the Slurm run that must reproduce it."""
    workdir = tmp_path_factory.mktemp("embedded")
    run = EmbeddedRun(workdir)
    run.table = run.snakemake("--cores", "2", "results/tables/privacy_audit.csv")
    if run.table.returncode == 0:
        run.full = run.snakemake("--cores", "2", timeout=3600)
        if run.full.returncode == 0:
            run.tables, run.shards = deterministic_tables(workdir), shard_hashes(workdir)
    return run


# The DP-MAE chain at its smallest: 256 shader images for (Syn)-ViP micro, 512 LAION-format
# crops, and one DP run (no ablations) with a checkpoint every 2 steps.
SMALL = """
privacy: {keep_keys: true}  # runs compared with one key share it after the first has ended
synthetic:
  datasets:
    shaders: {family: shaders, images: 256, resolution: 32, shard_size: 128, options: {programs: 16}}
data:
  laion: {source: natural, images: 512, resolution: 64, shard_size: 256}
pretrain:
  syn_vip: {models: [micro], epochs: 1, batch_size: 64, warmup_epochs: 0}
dp_pretrain:
  models: [micro]
  EXTRA
  settings: {steps: STEPS, batch_size: 64, micro_batch: 32, warmup_steps: 1, checkpoint_every: 2, log_every: 1}
  ablations: {dataset_size: [], random_init: [], model_size: [], batch_size: [], decoder_depth: [], \
mask_ratio: [], epsilon: []}
"""
RUN = "results/dp_pretrain/vip_micro"


def slurm_arguments(*overrides: str) -> list[str]:
    """The slurm profile as a user runs it here: the site settings (partition) and resources
    that fit a 2-CPU node given on the command line, squeue for job states (no accounting)."""
    return [
        "--profile",
        str(ROOT / "profiles/slurm"),
        "--slurm-status-command",
        "squeue",
        "--slurm-init-seconds-before-status-checks",
        "1",
        "--seconds-between-status-checks",
        "2",
        "--default-resources",
        "slurm_partition=test",
        "mem_mb=2000",
        "cpus_per_task=1",
        "runtime=60",
        "--set-resources",
        "dp_mae:mem_mb=4000",
        *overrides,
    ]


def small_config(path: Path, steps: int, dp_extra: str = "") -> Path:
    """The small chain with `steps` DP steps; `dp_extra`: more `dp_pretrain` keys (YAML flow)."""
    path.write_text(SMALL.replace("STEPS", str(steps)).replace("EXTRA", dp_extra))
    return path


@pytest.fixture(scope="session")
def reference(tmp_path_factory) -> Path:
    """A local single-process run of test_slurm's small chain, 8 DP steps (for the Slurm
    tests that compare against it: built once a session)."""
    workdir = tmp_path_factory.mktemp("local")
    done = run_snakemake(
        workdir, f"{RUN}/model.pt", "--cores", "2", "--configfile", str(small_config(workdir / "small.yaml", 8))
    )
    assert done.returncode == 0, done.output[-3000:]
    return workdir
