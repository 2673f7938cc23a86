# dpvip: regenerate the results of ViP, DP-RandP and Mehta et al. as a verifiable bundle.
# Embedded default:  snakemake --cores all
# Paper scale:       snakemake --profile profiles/slurm --configfile config/paper.yaml
from snakemake.utils import min_version

min_version("9.0")


configfile: os.path.join(workflow.basedir, "config", "config.yaml")


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/privacy.smk"
include: "rules/synthetic.smk"
include: "rules/tables.smk"
include: "rules/figures.smk"
include: "rules/bundle.smk"


rule all:
    default_target: True
    input:
        rules.bundle.output,
