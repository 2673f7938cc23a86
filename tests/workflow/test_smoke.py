"""The paper-shape smoke run (issue 24): config/smoke.yaml over config/paper.yaml runs every rule
of the paper DAG once per model size, with the paper's models, resolutions and recipes, for a
step or two on generated data; every job records its peak RSS (its log and benchmark file).

A dry run checks the job graph against the paper's. The end-to-end run (marked `smoke`; about
11 minutes on 2 cores, every job on one thread so that two run side by side) is in `make test`.
It checks that every planned job ran and logged its exact peak RSS, and that the paper-shape
outputs are what the paper's settings make (ViP-Large's 24 blocks of 1024, ViTDet at 1024 px,
a 36,864-d blocks4 cache of a ViT-B, WRN-16-4 with K = 16 augmentations, ...)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import run_snakemake
from test_workflow import job_counts

from dpvip.report.bundle.build import verify_bundle
from dpvip.report.jobs.smoke import format_summary, smoke_jobs
from dpvip.train.metrics import read_metrics

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ("--configfile", str(ROOT / "config/paper.yaml"), str(ROOT / "config/smoke.yaml"))
pytestmark = pytest.mark.workflow

# The generated data the paper reads from disk: the LAION stand-in's shards (the paper indexes
# LAION's where they lie, in the same rule laion_index) and the COCO stand-in.
STAND_INS = {"laion_natural_shard": 1, "coco_standin": 2}
SIZES = ("nano", "tiny", "small", "base", "large")  # ViP Table 3
SMOKE_DISK_BYTES = 22e9  # measured 20 GB: ViP-Large's and (Syn)-ViP-Large's checkpoints and states
# One job per rule and model size. Where a rule has more, they are the paper's distinct kinds
# of one job, each once: the 4 synthetic datasets; evaluations (one probe per (Syn)-ViP and ViP
# size; few-shot: Caltech-101 5-shot for Table 2's four backbones, Aircraft 2-shot for Figure
# 5's sizes; COCO, ADE20K and DP fine-tuning of ViP-Base, whose (Syn)-ViP-Base cells stay
# empty: the same job on another checkpoint of the same size); DP-RandP's Phase I
# (WRN-16-4, its MoCo run, WRN-40-4) and the private runs its tables and figures show at one
# epsilon and seed; Mehta et al.'s caches (ViT-B prelogits at 384 px, centre and inception, of
# both MAEs; the WRN's), the blocks4 cache; every study, table, figure and audited mechanism.
SMOKE_JOBS = STAND_INS | {
    "synthetic_shard": 4,
    "synthetic_index": 4,
    "laion_index": 1,
    "syn_vip": 5,
    "syn_vip_reconstructions": 5,
    "dp_mae": 5,
    "evaluate": 10 + 9 + 1 + 1 + 1,
    "dprandp_phase1": 3,
    # CIFAR-10 at epsilon 1: DP-RandP, w/o Phase II, Phase II only and cold (Figures 2, 6,
    # Table 25), DP-RandP and w/o Phase II from MoCo (Table 11) and WRN-40-4 (Table 12);
    # CIFAR-100 and DermaMNIST: DP-RandP and cold
    "dprandp_private": 4 + 2 + 2 + 2 + 2,
    "transfer_features": 7,
    "transfer_study": 9,
    "privacy_audit": 1,
    "privacy_curve_vip_figure6": 1,
    "privacy_empirical_audit": 5,
    "privacy_empirical_grid": 1,
    "table_privacy_audit": 1,
    "table_privacy_empirical": 1,
    "table_synthetic_datasets": 1,
    "table_vip_table3": 1,
    "table_vip_dp_runs": 1,
    "table_vip_result": 10,
    "table_vip_claims": 1,
    "table_dprandp": 10,
    "table_dprandp_cost": 2,
    "table_dprandp_claims": 1,
    "table_dprandp_probe": 4,
    "table_mehta": 5,
    "table_mehta_hyperparameters": 4,
    "table_mehta_throughput": 1,
    "table_mehta_claims": 1,
    "table_claims": 1,
    "table_coverage": 1,
    "compute_budget": 1,
    "figure_vip_figure6": 1,
    "figure_privacy_empirical": 1,
    "figure_synthetic_samples": 1,
    "figure_syn_vip_loss": 1,
    "figure_syn_vip_reconstructions": 1,
    "figure_vip_dp_loss": 4,  # ViP Figures 3a, 3b, 4a, 4b (Figure 7 compares random inits, not run)
    "figure_vip_evaluations": 2,
    "figure_dprandp": 5,
    "figure_mehta": 2,
    "bundle_report": 1,
    "bundle": 1,
    "all": 1,
}


def test_dry_run_has_every_rule_of_the_paper_dag_once_per_model_size(tmp_path):
    paper = run_snakemake(tmp_path, "-n", "--configfile", str(ROOT / "config/paper.yaml"))
    smoke = run_snakemake(tmp_path, "-n", *CONFIGS)
    assert paper.returncode == 0 and smoke.returncode == 0, paper.output + smoke.output
    assert set(job_counts(smoke.output)) == set(job_counts(paper.output)) | set(STAND_INS)
    assert job_counts(smoke.output) == SMOKE_JOBS
    for rule in ("syn_vip", "dp_mae"):  # every ViP size, on the CPU (no GPU asked for)
        blocks = re.findall(rf"rule {rule}:\n((?:    .*\n)*)", smoke.output)
        models = sorted(re.search(r"wildcards: (?:model|run)=(?:vip_)?(\w+)", b)[1] for b in blocks)
        assert models == sorted(SIZES), rule
        assert all("gpu=0" in block for block in blocks), rule


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """The smoke run, once: its labelled images, then the whole DAG on 2 cores. Its folder
    (20 GB: ViP-Large's checkpoints and resumable states) is removed afterwards."""
    workdir = tmp_path_factory.mktemp("smoke")
    free = shutil.disk_usage(workdir).free
    if free < SMOKE_DISK_BYTES:  # a job would fail half-way through a checkpoint otherwise
        pytest.fail(
            f"the smoke run needs {SMOKE_DISK_BYTES / 1e9:.0f} GB free under {workdir}; {free / 1e9:.1f} GB are"
        )
    images = subprocess.run(
        [sys.executable, "-m", "dpvip.data.smoke_images"],
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    assert images.returncode == 0, images.stderr
    done = run_snakemake(workdir, "--cores", "2", *CONFIGS, timeout=3600)
    yield workdir, done
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.smoke
def test_every_planned_job_ran_and_recorded_its_peak_rss(smoke_run):
    workdir, done = smoke_run
    assert done.returncode == 0, done.output[-20000:]
    assert job_counts(done.output) == SMOKE_JOBS
    jobs = smoke_jobs(workdir)
    assert Counter(job.rule for job in jobs) == {rule: n for rule, n in SMOKE_JOBS.items() if rule != "all"}
    assert len({job.job for job in jobs}) == len(jobs)
    unmeasured = [job.job for job in jobs if job.exact_rss_mb is None]  # every job logs its exact peak
    assert not unmeasured, format_summary(jobs)
    # ViP-Large's MAE (330M parameters) with its AdamW state is over 4 GB (4 x 4 bytes each)
    peaks = {job.job: job.peak_rss_mb for job in jobs}
    assert peaks["pretrain/syn_vip_large"] > 4000 and peaks["dp_pretrain/vip_large"] > 4000


@pytest.mark.slow
@pytest.mark.smoke
def test_outputs_have_the_papers_shapes(smoke_run):
    workdir, done = smoke_run
    assert done.returncode == 0, done.output[-20000:]
    results = workdir / "results"
    for size in SIZES:  # (Syn)-ViP: 2 steps of 4 images at 224 px; DP-MAE: 2 DP steps at epsilon 8
        assert [r["step"] for r in read_metrics(results / f"pretrain/syn_vip_{size}/metrics.jsonl")] == [1, 2]
        ledger = json.loads((results / f"dp_pretrain/vip_{size}/privacy.json").read_text())
        assert ledger["steps_done"] == 2 and ledger["examples"] == 64 and 7.9 < ledger["epsilon_spent"] <= 8.0
    coco = json.loads((results / "evaluate/coco/vip_base.json").read_text())["scores"]
    assert (coco["settings"]["image_size"], coco["settings"]["rois_per_image"], coco["encoder"]["size"]) == (
        1024,
        512,
        "base",
    )
    ade = json.loads((results / "evaluate/ade20k/vip_base.json").read_text())
    assert ade["scores"]["image_size"] == 512 and ade["scores"]["settings"]["channels"] == 768
    private = json.loads((results / "dprandp/private/CIFAR-10/randp_wrn16_4/p1_eps1_seed0.json").read_text())
    assert (private["run"]["model"], private["augmult"], private["privacy"]["steps_done"]) == ("wrn16_4", 16, 2)
    features = results / "dp_transfer/features"
    blocks4 = json.loads((features / "syn_vip_base/ImageNet-1k/blocks4_center224/meta.json").read_text())
    assert (blocks4["width"], blocks4["dtype"]) == (12 * 4 * 768, "float16")  # ViT-B: 36,864-d
    head = json.loads((features / "vip_base/ImageNet-1k/prelogits_inception384/meta.json").read_text())
    assert head["width"] == 768 and head["fingerprint"]["features"].endswith("inception384")
    train = np.load(features / "syn_vip_base/ImageNet-1k/blocks4_center224/train_v0_00000.npy", mmap_mode="r")
    assert train.shape == (10, 36864) and train.dtype == np.float16 and np.isfinite(train).all()
    bundle = verify_bundle(results / "bundle")  # secret runs: a private bundle
    assert bundle.ok and not bundle.unlisted and not bundle.not_private
    # every DP run's key was outside results/ and is deleted now that its results exist
    assert not list(results.rglob("*.key")) and not list((workdir / ".dpvip/keys").rglob("*.key"))
