"""Epsilon against iterations for one DP-SGD run, under each configured accountant."""

import pandas as pd

from dpvip.logs import logging_to
from dpvip.privacy.curves import epsilon_curve, step_grid

with logging_to(snakemake.log[0]):
    curve = snakemake.params.curve
    n = curve["n"]
    steps = step_grid(curve["steps"], curve["points"])
    frame = pd.DataFrame({"steps": steps})
    frame["n"], frame["sample_rate"], frame["sigma"], frame["delta"] = n, curve["batch"] / n, curve["sigma"], 1 / (2 * n)
    for accountant in curve["accountants"]:
        frame[f"epsilon_{accountant}"] = epsilon_curve(curve["batch"] / n, curve["sigma"], steps, 1 / (2 * n), accountant)
    frame.to_csv(snakemake.output[0], index=False)
