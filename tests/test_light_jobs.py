"""What must not load torch: the plan (`dpvip.plan`) and everything the Snakefile imports,
so the workflow checks its config and knows every job in a second; and the jobs that only
read small result files and write tables, figures or the bundle, so they start in a second or
two (torch and torchvision cost 4-5 s of a job's start-up here).

Each light rule's script is found in rules/*.smk; its imports, and the plan modules whose
objects Snakemake unpickles into its `params`, are run in a fresh interpreter that then
reports the heavy packages it loaded."""

from __future__ import annotations

import ast
import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dpvip.plan

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "torchvision", "timm", "opacus")
# The Snakefile passes plan objects to jobs as params (unpickled before the script runs).
PLAN_MODULES = tuple(f"dpvip.plan.{m.name}" for m in pkgutil.iter_modules(dpvip.plan.__path__))
WORKFLOW_IMPORT = re.compile(r"^\s*(?:from\s+(dpvip[\w.]*)\s+import|import\s+(dpvip[\w.]*))", re.M)
LIGHT_RULE = re.compile(r"^(table_|figure_|bundle)")


def rule_scripts() -> dict[str, Path]:
    """{rule: script} for every rule of the workflow that has a `script:`."""
    scripts = {}
    for smk in sorted((ROOT / "rules").glob("*.smk")):
        for rule, body in re.findall(r"^rule (\w+):\n((?:[ \t]+.*\n|\n)*)", smk.read_text(), re.M):
            script = re.search(r"script:\n\s+\"([^\"]+)\"", body)
            if script:
                scripts[rule] = (smk.parent / script.group(1)).resolve()
    return scripts


def imported_modules(script: Path) -> list[str]:
    tree = ast.parse(script.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            # `from package import module` imports the module too
            names += [
                f"{node.module}.{alias.name}" for alias in node.names if _is_module(f"{node.module}.{alias.name}")
            ]
    return names


def _is_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def heavy_modules_after_importing(modules: list[str]) -> list[str]:
    code = "import importlib, json, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules)
    code += f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def workflow_imports() -> list[str]:
    """The dpvip modules the Snakefile and rules/*.smk import."""
    sources = [ROOT / "Snakefile", *sorted((ROOT / "rules").glob("*.smk"))]
    return sorted({a or b for source in sources for a, b in WORKFLOW_IMPORT.findall(source.read_text())})


LIGHT_SCRIPTS = {rule: script for rule, script in rule_scripts().items() if LIGHT_RULE.match(rule)}


def test_every_table_figure_and_bundle_rule_is_found():
    assert {
        "table_privacy_audit",
        "table_privacy_empirical",
        "figure_privacy_empirical",
        "table_vip_table3",
        "table_vip_result",
        "table_dprandp",
        "table_mehta",
        "figure_vip_figure6",
        "figure_syn_vip_reconstructions",
        "figure_dprandp",
        "bundle",
        "bundle_report",
    } <= set(LIGHT_SCRIPTS)
    assert len(LIGHT_SCRIPTS) == 28  # every table_/figure_/bundle rule in rules/*.smk


def test_the_plan_has_every_planning_module():
    assert set(PLAN_MODULES) >= {
        "dpvip.plan.pretrain",
        "dpvip.plan.dp_pretrain",
        "dpvip.plan.vip_runs",
        "dpvip.plan.vip_rows",
        "dpvip.plan.vip_evaluations",
        "dpvip.plan.dprandp_phase1",
        "dpvip.plan.dprandp_runs",
        "dpvip.plan.dprandp_private",
        "dpvip.plan.dprandp_rows",
        "dpvip.plan.transfer",
    }


def test_the_plan_and_the_workflow_imports_load_no_torch():
    modules = workflow_imports()
    # the plan's modules are where rules/common.smk takes every run from
    assert {m for m in modules if m.startswith("dpvip.plan.")} >= {
        "dpvip.plan.vip_runs",
        "dpvip.plan.vip_evaluations",
        "dpvip.plan.dprandp_runs",
        "dpvip.plan.dprandp_rows",
        "dpvip.plan.transfer",
    }
    assert heavy_modules_after_importing(["dpvip.plan", *PLAN_MODULES, *modules]) == []


@pytest.mark.parametrize("rule", sorted(LIGHT_SCRIPTS))
def test_light_job_imports_no_torch(rule):
    modules = imported_modules(LIGHT_SCRIPTS[rule]) + list(PLAN_MODULES)
    assert heavy_modules_after_importing(modules) == []


def test_the_check_can_fail():
    """A script importing a torch module is caught (so the checks above are not vacuous)."""
    assert heavy_modules_after_importing(["dpvip.privacy.noise"]) == ["torch"]
