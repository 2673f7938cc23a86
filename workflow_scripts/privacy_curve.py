"""Epsilon against iterations for one DP-SGD run, under each configured accountant."""

import pandas as pd

from dpvip.logs import workflow_job
from dpvip.audit.curves import epsilon_curve, step_grid

with workflow_job(snakemake.log[0]):
    curve = snakemake.params.curve
    n, sample_rate, delta = curve["n"], curve["batch"] / curve["n"], 1 / (2 * curve["n"])
    steps = step_grid(curve["steps"], curve["points"])
    frame = pd.DataFrame({"steps": steps, "n": n, "sample_rate": sample_rate, "sigma": curve["sigma"], "delta": delta})
    for accountant in curve["accountants"]:
        frame[f"epsilon_{accountant}"] = epsilon_curve(sample_rate, curve["sigma"], steps, delta, accountant)
    frame.to_csv(snakemake.output[0], index=False)
