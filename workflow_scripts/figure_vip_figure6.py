"""ViP Figure 6: epsilon against DP-MAE iterations."""

import pandas as pd

from dpvip.logs import workflow_job
from dpvip.report.privacy.figures import epsilon_curve_figure
from dpvip.report.common.figures import save_figure

with workflow_job(snakemake.log[0]):
    save_figure(epsilon_curve_figure(pd.read_csv(snakemake.input[0])), snakemake.output[0])
