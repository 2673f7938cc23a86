"""The compute budget of a workflow target: FLOPs, GPU-hours and host memory per job.

For every job a target needs (Snakemake's own DAG, `dpvip.budget.workflow`), the FLOPs
of what the job's code runs are counted with `torch.utils.flop_counter` on its networks at
their configured shapes (`networks`), times the steps its plan gives it (`estimates`),
and turned into GPU-hours on an A100 and an H100 at a stated utilisation. The Slurm runtime
each GPU job gets is checked against its budgeted wall time, host memory is read from the
paper-shape smoke run (`smoke`), and the papers' own run times are set beside ours
(`tables`). It sits beside the report (it reads plans and counts on the job packages'
networks, so it may import them, which the report may not).
"""

from __future__ import annotations

# Peak dense bf16 tensor throughput (TFLOP/s) assumed per GPU, and the share of it a job
# reaches: 40 % is what well-tuned ViT training reaches on these GPUs (model FLOPs utilisation).
PEAK_TFLOPS = {"A100": 312.0, "H100": 989.0}  # A100 SXM/PCIe bf16; H100 SXM bf16 (dense)
UTILISATION = 0.40
# Peaks of the hardware the papers name, for the utilisation their run times imply:
# V100 fp16 tensor cores (no bf16); a TPU v4 chip's 275 bf16 TFLOP/s over its 2 TensorCores.
PAPER_PEAK_TFLOPS = {"A100": 312.0, "V100": 125.0, "TPU v4 core": 137.5}
# A DP step's time over the non-private step's on the same network and batch, measured on one
# H200 (bf16 autocast, torch 2.11; tests/gpu/paper_steps.py's `ratios`, 2026-11-28) at the paper
# config's micro-batches: DP-MAE ViP-Base 224 px in micro-batches of 512; DP fine-tuning of
# ViP-Base (1,000 classes, 224 px) in micro-batches of 256; DP-RandP Phases II/III on WRN-16-4
# at 32 px with 16 views, micro-batches of 256 examples; a DP linear head on 65,536 feature
# rows (2,048 -> 1,000). A DP job's GPU time is its non-private training FLOPs times this ratio
# at the stated utilisation (the FLOPs its clipping adds run far below the rate of the rest).
DP_STEP_TIME_RATIOS = {
    "dp_mae": 1.54,
    "dp_finetune": 1.82,
    "dprandp_private": 5.32,
    "mehta_heads": 3.28,
    "dprandp_probe": 3.28,
}
