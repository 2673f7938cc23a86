"""Multi-process DP fine-tuning under a real Slurm (the cluster of tests/slurm_cluster.py):
ViP Table 5's evaluate job on the DP-MAE run of test_slurm.py's small chain, asked for 2
processes (evaluate.dp_finetune.processes), goes through sbatch and is launched as the paper
config launches it (srun, one torchrun per node, a c10d rendezvous on the job's first node).
Its result is the one the same job writes as 1 local process, up to the order of
floating-point sums: the same ledger, realised batch sizes and clipped fraction, and the
same accuracy within one test image."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import copy_secret_keys, run_snakemake, slurm_arguments, small_config

from dpvip.files import private_work_dir
from test_slurm import submitted

pytestmark = [pytest.mark.workflow, pytest.mark.slurm, pytest.mark.slow]

RESULT = "results/evaluate/dp_finetune/vip_micro/ImageNet-1K.json"
LOG = "results/logs/evaluate/dp_finetune/vip_micro/ImageNet-1K.log"
TEST_IMAGES = 1650  # the photo crops' test split that stands in for ImageNet-1K
STEPS = 4  # DP fine-tuning steps (the embedded default has 12): enough to move every weight


def evaluation_config(path: Path, processes: int) -> Path:
    path.write_text(f"evaluate:\n  dp_finetune: {{steps: {STEPS}, processes: {processes}, checkpoint_every: 2}}\n")
    return path


def with_upstream(reference: Path, workdir: Path) -> Path:
    """The reference chain's results (shards, (Syn)-ViP, the DP-MAE run), so only the
    evaluate job runs there."""
    shutil.copytree(
        reference / "results", workdir / "results", ignore=shutil.ignore_patterns("logs", "benchmarks", "evaluate")
    )
    return workdir


def test_dp_fine_tuning_as_two_processes_under_slurm_matches_one_local_process(slurm_cluster, reference, tmp_path):
    local = with_upstream(reference, tmp_path / "local")
    small = small_config(tmp_path / "small.yaml", 8)  # the reference's DP-MAE run: not run again
    done = run_snakemake(
        local, RESULT, "--cores", "2", "--configfile", str(small), str(evaluation_config(tmp_path / "one.yaml", 1))
    )
    assert done.returncode == 0, done.output[-3000:]
    assert "launching:" not in (local / LOG).read_text()  # one process, no torchrun

    cluster = with_upstream(reference, tmp_path / "cluster")
    # the fine-tuning's key, so both draw the same noise (the DP-MAE run is not run again here:
    # its key stayed in the reference's key store and was released when it finished)
    assert copy_secret_keys(local, cluster) == 1
    two = evaluation_config(tmp_path / "two.yaml", 2)
    resources = slurm_arguments("evaluate:gpu=0", "evaluate:cpus_per_task=2", "evaluate:mem_mb=4000")
    done = run_snakemake(cluster, RESULT, "--configfile", str(small), str(two), *resources, env=slurm_cluster.env)
    assert done.returncode == 0, done.output[-3000:]
    assert submitted(cluster) == ["evaluate"]  # through sbatch, not locally
    log = (cluster / LOG).read_text()
    assert "launching: srun" in log and "--rdzv_backend=c10d" in log and "--nproc_per_node=2" in log
    work = private_work_dir(cluster / RESULT)
    assert "evaluate run --settings" in log and (work / "settings.yaml").is_file()

    one, two = (json.loads((folder / RESULT).read_text()) for folder in (local, cluster))
    assert (one["world_size"], two["world_size"]) == (1, 2)
    assert one["privacy"]["steps_done"] == two["privacy"]["steps_done"] == STEPS
    for key in ("privacy", "batch_sizes", "clipped_fraction", "settings", "data", "evaluation"):
        assert two[key] == one[key], key
    assert two["columns"]["epsilon"] == one["columns"]["epsilon"] and two["columns"]["delta"] == one["columns"]["delta"]
    # weights equal up to summation order (1e-7 here) may flip a near-tie of two logits
    accuracy = two["columns"]["Top-1 Accuracy"], one["columns"]["Top-1 Accuracy"]
    assert abs(accuracy[0] - accuracy[1]) <= 100 / TEST_IMAGES + 1e-9, accuracy
    # the states are forgotten once the result exists; the key (kept: privacy.keep_keys) is in
    # the key store, not in the private folder
    key = cluster / ".dpvip/keys" / f"{work.relative_to(cluster)}.key"
    assert not list(work.glob("loop_*")) and key.is_file() and not list(work.glob("*.key"))
