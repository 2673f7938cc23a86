"""The slurm profile against a real Slurm: jobs go through sbatch and srun on a single-node
cluster these tests bring up (tests/slurm_cluster.py); DP-MAE as 2 processes launched the
way the paper config launches it (srun, one torchrun per node, c10d rendezvous), and a
DP-MAE job cancelled mid-run that resumes from its checkpoint with its ledger."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import torch
from conftest import (
    RUN,
    SEEDED,
    copy_secret_keys,
    deterministic_tables,
    run_snakemake,
    shard_hashes,
    slurm_arguments,
    small_config,
    snakemake_command,
    snakemake_env,
)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.workflow, pytest.mark.slurm, pytest.mark.slow]


def copy_upstream(reference: Path, workdir: Path) -> None:
    """The reference's inputs of the DP run (shards, (Syn)-ViP), so only dp_mae runs again,
    and the DP run's secret key, so it draws the reference's noise and batches."""
    shutil.copytree(
        reference / "results", workdir / "results", ignore=shutil.ignore_patterns("dp_pretrain", "logs", "benchmarks")
    )
    assert copy_secret_keys(reference, workdir) == 1


def submitted(workdir: Path) -> list[str]:
    """The rules of the jobs Snakemake submitted to Slurm there, in order (from every log:
    the bundle's report writes one of its own)."""
    log = "\n".join(path.read_text() for path in sorted((workdir / ".snakemake/log").glob("*.snakemake.log")))
    rule_of = {job: rule for rule, job in re.findall(r"^rule (\w+):\n(?:    .*\n)*?    jobid: (\d+)", log, re.M)}
    return [rule_of[job] for job in re.findall(r"^Job (\d+) has been submitted with SLURM jobid", log, re.M)]


def weights(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / "model.pt", map_location="cpu", weights_only=False)["model"]


def max_difference(a: dict, b: dict) -> float:
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def test_the_cluster_runs_batch_jobs_and_multi_task_steps(slurm_cluster, tmp_path):
    out = tmp_path / "job.out"
    submitted = slurm_cluster.run("sbatch", "--parsable", "--ntasks=2", "-o", str(out), "--wrap", "srun hostname")
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 60
    while slurm_cluster.run("squeue", "-h", "-j", job, "-t", "PD,R").stdout.strip() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert out.read_text().split() == [slurm_cluster.host] * 2


def test_dp_mae_as_two_processes_under_slurm_matches_one_process(slurm_cluster, reference, tmp_path):
    """The paper config's launch (srun, one torchrun per node, c10d rendezvous on the job's
    first node), here with 2 gloo processes on one node: the same ledger and, up to the
    order of floating-point sums, the same weights as one local process."""
    copy_upstream(reference, tmp_path)
    config = small_config(tmp_path / "two.yaml", 8, "gpus: 2\n  threads: 2")
    done = run_snakemake(
        tmp_path,
        f"{RUN}/model.pt",
        "--configfile",
        str(config),
        *slurm_arguments("dp_mae:gpu=0", "dp_mae:cpus_per_task=2"),
        env=slurm_cluster.env,
    )
    assert done.returncode == 0, done.output[-3000:]
    assert submitted(tmp_path) == ["dp_mae"]  # through sbatch, not locally
    assert list((tmp_path / ".snakemake/slurm_logs/rule_dp_mae/vip_micro").glob("*.log"))  # the profile keeps them
    log = (tmp_path / "results/logs/dp_pretrain/vip_micro.log").read_text()
    assert "launching: srun" in log and "--rdzv_backend=c10d" in log and "--nproc_per_node=2" in log
    two, one = tmp_path / RUN, reference / RUN
    record = lambda run: torch.load(run / "model.pt", map_location="cpu", weights_only=False)["record"]  # noqa: E731
    assert record(two)["world_size"] == 2 and record(one)["world_size"] == 1
    assert json.loads((two / "privacy.json").read_text()) == json.loads((one / "privacy.json").read_text())
    assert max_difference(weights(two), weights(one)) < 1e-5


def test_a_cancelled_dp_mae_job_resumes_from_its_checkpoint_under_slurm(slurm_cluster, reference, tmp_path):
    """scancel mid-run; the profile's retries resubmit the job, which resumes from its last
    checkpoint with its ledger and ends where the uninterrupted local run ends."""
    copy_upstream(reference, tmp_path)
    config = small_config(tmp_path / "small.yaml", 8)
    command = snakemake_command(tmp_path, f"{RUN}/model.pt", "--configfile", str(config), *slurm_arguments())
    with open(tmp_path / "snakemake.out", "w") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=snakemake_env(tmp_path, slurm_cluster.env)
        )
        state = tmp_path / RUN / "work" / "state.pt"
        deadline = time.monotonic() + 600
        while not state.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert state.exists(), (tmp_path / "snakemake.out").read_text()[-3000:]
        jobs = slurm_cluster.run("squeue", "-h", "-t", "R", "-o", "%i %j").stdout.split("\n")
        running = [line.split()[0] for line in jobs if line.strip()]
        assert running, jobs
        assert slurm_cluster.run("scancel", *running).returncode == 0
        assert process.wait(timeout=900) == 0, (tmp_path / "snakemake.out").read_text()[-3000:]
    output = (tmp_path / "snakemake.out").read_text()
    assert "CANCELLED" in output or "failed" in output.lower(), output[-3000:]
    assert "resuming" in (tmp_path / "results/logs/dp_pretrain/vip_micro.log").read_text()
    resumed, uninterrupted = tmp_path / RUN, reference / RUN
    assert json.loads((resumed / "privacy.json").read_text()) == json.loads(
        (uninterrupted / "privacy.json").read_text()
    )
    assert max_difference(weights(resumed), weights(uninterrupted)) == 0.0


def fitted_resources() -> list[str]:
    """The profile's per-rule resources cut to what a 2-CPU test node holds (a site would
    edit them the same way): every rule it names gets 1 CPU, 5 GB and 2 hours."""
    import yaml

    profile = yaml.safe_load((ROOT / "profiles/slurm/profile.yaml").read_text())
    return [
        f"{rule}:{key}={value}"
        for rule in profile["set-resources"]
        for key, value in (("cpus_per_task", 1), ("mem_mb", 5000), ("runtime", 120))
    ]


# One table per paper and the privacy audit: together they cross every stage that runs on
# the cluster (synthetic shards, the LAION stand-in, (Syn)-ViP, DP-MAE, an evaluation, DP-RandP
# Phase I and its private runs, a feature cache and a DP transfer study, the audits) and the
# local table rules, in a few minutes instead of the whole DAG's.
SUBSET = ("vip_table1", "dprandp_table6", "mehta_table5", "privacy_audit")
SUBSET_SHARDS = ("synthetic/shaders", "synthetic/stylegan_oriented", "data/laion")


def test_one_table_per_paper_through_slurm_equals_the_local_run(slurm_cluster, embedded_default, tmp_path):
    """`snakemake --profile profiles/slurm` on the embedded default, asked for one table per
    paper and the privacy audit: every job but the local table rules goes through sbatch (and
    srun), their logs are kept, and the tables and the shards they were built from are those of
    the local run of the whole DAG."""
    assert embedded_default.full is not None and embedded_default.full.returncode == 0, "the local run failed"
    cluster = tmp_path
    started = time.monotonic()
    targets = [f"results/tables/{table}.csv" for table in SUBSET]
    # seeded, as the local run: the same noise and batches in both folders
    slurm = slurm_arguments(*fitted_resources())
    done = run_snakemake(cluster, *targets, *slurm, "--configfile", str(SEEDED), env=slurm_cluster.env, timeout=3600)
    assert done.returncode == 0, done.output[-3000:]
    print(f"{len(SUBSET)} tables through Slurm: {time.monotonic() - started:.0f} s")

    log = "\n".join(path.read_text() for path in sorted((cluster / ".snakemake/log").glob("*.snakemake.log")))
    remote = [rule for rule in re.findall(r"^rule (\w+):", log, re.M) if rule != "all"]
    local_rules = set(re.findall(r"^localrule (\w+):", log, re.M))
    sent = submitted(cluster)
    assert sorted(sent) == sorted(remote)
    # every cluster stage of the workflow is crossed
    assert {
        "synthetic_shard",
        "synthetic_index",
        "laion_natural_shard",
        "laion_index",
        "syn_vip",
        "dp_mae",
        "evaluate",
        "dprandp_phase1",
        "dprandp_private",
        "transfer_features",
        "transfer_study",
        "privacy_audit",
    } <= set(sent)
    assert local_rules == {"table_vip_result", "table_dprandp", "table_mehta", "table_privacy_audit"}
    assert len(list((cluster / ".snakemake/slurm_logs").rglob("*.log"))) == len(sent)  # kept

    tables = deterministic_tables(cluster)
    assert sorted(tables) == sorted(f"{table}.csv" for table in SUBSET)
    assert all(tables[name] == embedded_default.tables[name] for name in tables)
    shards = shard_hashes(cluster)
    local = {path: digest for path, digest in embedded_default.shards.items() if path.startswith(SUBSET_SHARDS)}
    assert shards == local and len(local) >= 9
