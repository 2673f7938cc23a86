"""dpvip as a Snakemake module of another workflow (tests/workflow/outer/Snakefile), which has
no configfile and runs in a folder that holds none of dpvip's files: dpvip finds its paper
values, report texts and library from its own folder, the data and results from the working
directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT, run_snakemake

from test_workflow import job_counts

pytestmark = pytest.mark.workflow
OUTER = ROOT / "tests" / "workflow" / "outer" / "Snakefile"
BUNDLE = "results/bundle/MANIFEST.sha256"  # everything dpvip makes (its rule all is excluded)


def run_outer(workdir: Path, *args: str, configfiles: list[str] = ()) -> subprocess.CompletedProcess:
    config = [f"dpvip_snakefile={ROOT / 'Snakefile'}"]
    if configfiles:
        config.append(f"dpvip_configfiles=[{', '.join(repr(str(path)) for path in configfiles)}]")
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(OUTER), "-d", str(workdir), *args, "--config", *config],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ) | {"MPLCONFIGDIR": str(workdir / ".mpl")},
    )
    done.output = done.stdout + done.stderr
    return done


def test_an_outer_workflow_builds_dpvip_tables_for_real(tmp_path):
    done = run_outer(
        tmp_path,
        "--cores",
        "1",
        "outer/coverage_rows.txt",
        "results/tables/vip_table3.csv",
        "results/tables/coverage.md",
    )
    assert done.returncode == 0, done.output
    print(done.output)  # the closing note quotes it
    assert job_counts(done.output) == {"coverage_rows": 1, "dpvip_table_coverage": 1, "dpvip_table_vip_table3": 1}
    coverage = pd.read_csv(tmp_path / "results/tables/coverage.csv")
    # the outer rule read dpvip's table: its line count is the header and one line a row
    assert int((tmp_path / "outer/coverage_rows.txt").read_text()) == len(coverage) + 1
    assert set(coverage["paper"]) == {"ViP", "DP-RandP", "Mehta et al."}
    # vip_table3 reads ViP's printed numbers from dpvip's config/paper_values, not the workdir's
    table3 = pd.read_csv(tmp_path / "results/tables/vip_table3.csv")
    printed = table3.set_index("model").loc[["nano", "tiny", "small", "base", "large"], "paper parameters (M)"]
    assert printed.tolist() == [18.6, 34.8, 61.6, 99.0, 233.3]
    assert not (tmp_path / "config").exists()


def test_an_outer_workflows_own_rule_all_stays_its_default_target(tmp_path):
    """With `exclude all`, a plain `snakemake` of the outer workflow plans its own target
    and the dpvip jobs it reads, not dpvip's whole DAG (about 200 jobs)."""
    done = run_outer(tmp_path, "-n")
    assert done.returncode == 0, done.output
    assert job_counts(done.output) == {"all": 1, "coverage_rows": 1, "dpvip_table_coverage": 1}


def test_an_outer_workflow_plans_the_paper_dag_with_a_site_overlay(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text("data:\n  laion:\n    shards: /site/laion/shards\nevaluate:\n  coco:\n    root: /site/coco\n")
    configfiles = [ROOT / "config/paper.yaml", site]
    done = run_outer(tmp_path, "-n", BUNDLE, configfiles=configfiles)
    assert done.returncode == 0, done.output
    # the site's paths reached dpvip's config (and the dry run names them, missing here)
    assert "config key 'data.laion.shards': /site/laion/shards does not exist" in done.output
    assert "config key 'evaluate.coco.root': /site/coco does not exist" in done.output
    alone = run_snakemake(tmp_path / "alone", "-n", BUNDLE, "--configfile", *map(str, configfiles))
    assert alone.returncode == 0, alone.output
    # the same jobs as dpvip run on its own with --configfile paper.yaml site.yaml
    module_jobs = {rule.removeprefix("dpvip_"): count for rule, count in job_counts(done.output).items()}
    assert module_jobs == job_counts(alone.output) and module_jobs["syn_vip"] == 6


def test_an_outer_workflow_that_imported_another_dpvip_is_stopped_naming_both(tmp_path):
    """The Snakefile plans with its own checkout's library or not at all."""
    other = tmp_path / "other"
    (other / "dpvip").mkdir(parents=True)
    (other / "dpvip" / "__init__.py").write_text("")
    outer = tmp_path / "Snakefile"
    outer.write_text(
        f"import sys\nsys.path.insert(0, {str(other)!r})\nimport dpvip\n\n\n"
        f"module dpvip:\n    snakefile:\n        {str(ROOT / 'Snakefile')!r}\n    config:\n        {{}}\n\n\n"
        "use rule * from dpvip as dpvip_*\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(outer), "-d", str(tmp_path), "-n"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode != 0
    assert (
        f"this Snakefile comes with the dpvip library in {ROOT / 'src'}, but dpvip was already imported "
        f"from {other / 'dpvip'}: import dpvip after the module block (or from {ROOT / 'src'}), "
        "so that one copy plans and runs"
    ) in done.stdout + done.stderr
