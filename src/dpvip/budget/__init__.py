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
