"""The GPU check's script (tests/gpu/paper_steps.py) in its tiny form on CPU: every paper GPU
job type it steps runs through the workflow's code paths, and its report says what ran."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("paper_steps.py")


@pytest.mark.slow
def test_the_tiny_paper_steps_run_every_job_type(tmp_path):
    environment = os.environ | {"PYTHONPATH": str(SCRIPT.parents[2] / "src")}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--device", "cpu", "--tiny",
         "--parts", "noise", "noise_kernel", "bound", "operations", "ratios", "dp_mae", "dp_finetune", "coco"],
        capture_output=True, text=True, env=environment, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "paper_steps.json").read_text())
    noise = report["noise"]  # 65,536 draws: the moments within about 4 standard errors
    assert abs(noise["mean"]) < 0.016 and abs(noise["std"] - 1) < 0.012 and abs(noise["kurtosis"] - 3) < 0.08
    assert noise["ks_pvalue"] > 1e-4 and noise["same_stream_same_draws"] and noise["other_step_equal_fraction"] == 0
    # the fused kernel (Triton's interpreter on CPU) adds its reference's values
    assert report["noise_kernel"]["max_difference_from_reference"] <= 1e-6
    # the clip bound: every cancelling-token share at most C; on a micro MAE it costs under 1%
    bound = report["bound"]
    assert bound["cancelling_cases"] == 6 and bound["cancelling_max_share_over_c"] <= 1.0
    assert 0.99 <= bound["mae_norm_over_bound_min"] <= 1.0
    # the fused ghost norm (interpreted) within the bound's error term, its S never below the exact
    assert bound["fused_error_over_bound_max"] <= 1.0 and bound["fused_exact_s_over_enlarged_max"] <= 1.0
    # the operations a step: on CPU "device" is the CPU counting the CUDA path, as the other row
    operations = report["operations"]
    assert set(operations) == {"bf16 device", "bf16 cpu_counting_cuda_path"}  # tiny: bf16 only
    assert operations["bf16 device"] == operations["bf16 cpu_counting_cuda_path"]
    assert all(row["ours"] > row["nonprivate"] > 0 for row in operations.values())
    # every DP job type's step timed beside its non-private step (times are not asserted)
    assert set(report["ratios"]) == {"dp_mae 4", "dp_finetune 4", "dprandp_private", "linear_head"}
    assert {row["examples"] for row in report["ratios"].values()} == {8, 32}
    dp_mae = report["dp_mae"]
    assert [row["step"] for row in dp_mae["steps"]] == [1, 2]
    assert 7.9 < dp_mae["epsilon_spent"] <= 8.0  # calibrated for its 2 steps at epsilon 8
    finetune = report["dp_finetune"]["result"]
    assert finetune["privacy"]["steps_done"] == 2 and finetune["privacy"]["noise_multiplier"] == 5.6
    assert finetune["privacy"]["private"] is True
    coco = report["coco"]["result"]["scores"]
    assert coco["train_images"] == 2 and coco["val_images"] == 2
    assert set(report["coco"]["result"]["columns"]) == {"COCO AP box", "COCO AP mask"}
