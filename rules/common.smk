# Configuration validation and the paths every stage shares.
import sys
from pathlib import Path

# The Snakefile uses this checkout's library even where dpvip is not installed (it only
# needs jsonschema and yaml, which Snakemake brings). Jobs find it through the
# workflow_scripts/dpvip link, since Snakemake puts a script's folder on sys.path.
SRC = str(Path(workflow.basedir) / "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)

from dpvip.config import validate_config
from dpvip.errors import DpvipInputError

try:
    validate_config(config, Path(workflow.basedir) / "config" / "schema.yaml")
except DpvipInputError as err:
    raise WorkflowError(f"invalid configuration: {err}") from None


def workflow_path(path):
    """Config paths are relative to the workflow folder, so any working directory works."""
    return str(Path(workflow.basedir) / path)


RESULTS = "results"
TABLES = f"{RESULTS}/tables"
FIGURES = f"{RESULTS}/figures"
LOGS = f"{RESULTS}/logs"
BENCHMARKS = f"{RESULTS}/benchmarks"
BUNDLE = f"{RESULTS}/bundle"
ENV = "../envs/dpvip.yaml"


def table_files(name):
    return multiext(f"{TABLES}/{name}", ".csv", ".md", ".tex")


def figure_files(name):
    return multiext(f"{FIGURES}/{name}", ".png", ".pdf")
