"""Jobs that only read small result files and write tables, figures or the bundle start in
a second or two: they import neither torch nor torchvision (4-5 s of a job's start-up here).

Each such rule's script is found in rules/*.smk; its imports, and the plan modules whose
objects Snakemake unpickles into its `params`, are run in a fresh interpreter that then
reports the heavy packages it loaded."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "torchvision", "timm", "opacus")
# Modules whose objects the Snakefile passes to jobs as params (unpickled before the script).
PLAN_MODULES = (
    "dpvip.evaluate.plan",
    "dpvip.randp.plan",
    "dpvip.transfer.plan",
    "dpvip.train.dp_runs",
    "dpvip.report.vip_rows",
    "dpvip.report.dprandp_rows",
)
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


LIGHT_SCRIPTS = {rule: script for rule, script in rule_scripts().items() if LIGHT_RULE.match(rule)}


def test_every_table_figure_and_bundle_rule_is_found():
    assert {
        "table_privacy_audit",
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
    assert len(LIGHT_SCRIPTS) == 19  # every table_/figure_/bundle rule in rules/*.smk


@pytest.mark.parametrize("rule", sorted(LIGHT_SCRIPTS))
def test_light_job_imports_no_torch(rule):
    modules = imported_modules(LIGHT_SCRIPTS[rule]) + list(PLAN_MODULES)
    assert heavy_modules_after_importing(modules) == []


def test_the_check_can_fail():
    """A script importing a torch module is caught (so the checks above are not vacuous)."""
    assert heavy_modules_after_importing(["dpvip.privacy.noise"]) == ["torch"]
