"""`pip install dpvip` installs the DP engine and nothing of the extras: the wheel built from
this checkout goes into a fresh venv with its core dependencies only, resolved by pip. There
`import dpvip.privacy` stays torch-free, the library example trains, one DP step clips a
layer through opacus' grad samplers and is accounted by all three accountants (the disk memo
on), `dpvip --version` and `dpvip privacy epsilon` work, a command that needs an extra names
it in one line, and no package of the `eval` or `workflow` extras can be imported.

torch is not installed there: this machine's copy (several GB) is lent to the venv with the
packages it requires, through a .pth file to a folder of links. pip sees them as installed,
and a dry run first makes sure it would download none of them."""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from importlib import metadata
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow

# What the extras bring (import names) and the core must not; jinja2 is left out: torch needs it.
EXTRAS_ONLY = (
    "snakemake",
    "pandas",
    "matplotlib",
    "tabulate",
    "jsonschema",
    "yaml",
    "psutil",
    "rocrate",
    "timm",
    "torchvision",
    "pycocotools",
    "webdataset",
    "sklearn",
    "skimage",
    "PIL",
    "tqdm",
)
LENT = "torch"  # lent, with what it requires, never installed
NEVER_INSTALLED = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")

IN_THE_VENV = f"""
import importlib.util, json, sys
import dpvip, dpvip.privacy as privacy
torch_free = "torch" not in sys.modules
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
n = 64
x, y = torch.randn(n, 6), torch.randint(0, 2, (n,))
model = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.Linear(8, 2))  # LayerNorm: opacus' grad sampler
ledger = privacy.PrivacyLedger.calibrate(
    "rdp", sample_rate=0.25, steps=2, target_epsilon=4.0, delta=1e-5, clip_norm=1.0
)
step = privacy.DPStep(
    privacy.ClippedGradientSum(model, clip_norm=1.0),
    privacy.make_optimizer("adamw", model.parameters(), lr=1e-3, weight_decay=0.0),
    ledger,
    examples=n,
    randomness=privacy.RunRandomness.fresh(),
)
for t in range(2):
    batch = torch.as_tensor(step.batch(t))
    step(t, [lambda: F.cross_entropy(model(x[batch]), y[batch], reduction="none")])
mechanism = [privacy.Mechanism(0.25, ledger.noise_multiplier, 2)]
print(json.dumps({{
    "dpvip": dpvip.__file__,
    "torch_free": torch_free,
    "spent": step.ledger.epsilon_spent(),
    "epsilon": {{name: privacy.epsilon(mechanism, 1e-5, name).epsilon for name in privacy.ACCOUNTANTS}},
    "importable": [name for name in {EXTRAS_ONLY!r} if importlib.util.find_spec(name)],
    "memo": "joblib" in sys.modules,
}}))
"""


def pypi_unreachable() -> str | None:
    """Why PyPI cannot be reached (opacus and dp-accounting come from it), or None."""
    context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
    try:
        with urllib.request.urlopen("https://pypi.org/simple/opacus/", timeout=20, context=context):
            return None
    except (urllib.error.URLError, OSError) as err:
        return f"PyPI cannot be reached ({err}): the core install resolves opacus and dp-accounting there"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_closure(name: str) -> list[metadata.Distribution]:
    """`name`'s distribution and every one it requires, transitively (markers evaluated here,
    extras followed), as installed in this environment."""
    from packaging.requirements import Requirement

    found: dict[str, metadata.Distribution] = {}
    done: set[tuple[str, frozenset[str]]] = set()
    todo = [(name, frozenset[str]())]
    while todo:
        wanted, extras = todo.pop()
        key = canonical(wanted)
        if (key, extras) in done:
            continue
        done.add((key, extras))
        found[key] = distribution = found.get(key) or metadata.distribution(wanted)
        for text in distribution.requires or []:
            requirement = Requirement(text)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": extra}) for extra in extras or {""}):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return list(found.values())


def lend(distributions: list[metadata.Distribution], folder: Path) -> None:
    """Links in `folder` to each distribution's top-level files and folders (its metadata too)."""
    folder.mkdir()
    for distribution in distributions:
        location = Path(distribution.locate_file(""))
        for top in {Path(file).parts[0] for file in distribution.files or []}:
            if top in ("..", "__pycache__") or top.endswith(".pth") or (folder / top).exists():
                continue
            (folder / top).symlink_to(location / top)


def run(command: list[str], env: dict, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, command))} failed:\n{done.stdout}\n{done.stderr}"
    return done


def test_the_core_install_runs_the_dp_engine_and_nothing_of_the_extras(tmp_path):
    reason = pypi_unreachable()
    if reason:
        pytest.skip(reason)
    started = time.monotonic()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR") or str(ROOT / ".cache" / "pip")
    env["DPVIP_MEMO"] = str(tmp_path / "memo")  # the memo on: joblib is a core dependency
    env["DPVIP_KEY_DIR"] = str(tmp_path / "keys")
    pip = [sys.executable, "-m", "pip", "--python", str(tmp_path / "venv" / "bin" / "python")]

    # The wheel, from a copy of what it is built from (links resolved: schema.yaml, embedded_config.yaml).
    source = tmp_path / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", "dist", str(source)],
        env,
        tmp_path,
    )
    (wheel,) = (tmp_path / "dist").glob("dpvip-*.whl")

    run([sys.executable, "-m", "venv", "--without-pip", "venv"], env, tmp_path)
    (site,) = (tmp_path / "venv" / "lib").glob("python3*/site-packages")
    lent = [d for d in requirement_closure(LENT) if canonical(d.metadata["Name"]) != "setuptools"]
    lend(lent, tmp_path / "lent")
    (site / "lent.pth").write_text(f"{tmp_path / 'lent'}\n")

    dry = run([*pip, "install", "--dry-run", "-q", "--report", "report.json", str(wheel)], env, tmp_path)
    planned = [item["metadata"]["name"] for item in json.loads((tmp_path / "report.json").read_text())["install"]]
    assert not [name for name in planned if NEVER_INSTALLED.match(canonical(name))], (planned, dry.stderr)
    run([*pip, "install", "-q", str(wheel)], env, tmp_path)
    installed = run([*pip, "list", "--format=json", "--path", str(site)], env, tmp_path)
    print("installed:", sorted(item["name"] for item in json.loads(installed.stdout)))

    python, dpvip = tmp_path / "venv" / "bin" / "python", tmp_path / "venv" / "bin" / "dpvip"
    result = json.loads(run([python, "-c", IN_THE_VENV], env, tmp_path).stdout.splitlines()[-1])
    print(result)
    assert Path(result["dpvip"]).is_relative_to(site)
    assert result["torch_free"], "import dpvip.privacy loaded torch"
    assert 0 < result["spent"] <= 4.0
    assert all(0 < value < 10 for value in result["epsilon"].values()), result["epsilon"]
    assert result["importable"] == [], f"the core install can import {result['importable']}"
    assert result["memo"] and any((tmp_path / "memo").rglob("output.pkl")), "the disk memo (joblib) stored nothing"

    example = run([python, ROOT / "examples" / "dp_training_loop.py"], env, tmp_path).stdout
    assert example.startswith("test accuracy"), example

    version = run([dpvip, "--version"], env, tmp_path).stdout.strip()
    assert version == f"dpvip {tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['version']}"
    epsilon = run(
        [
            dpvip,
            "privacy",
            "epsilon",
            "--sample-rate",
            "0.01",
            "--noise-multiplier",
            "1.0",
            "--steps",
            "100",
            "--delta",
            "1e-5",
            "--accountant",
            "rdp",
            "--json",
        ],
        env,
        tmp_path,
    ).stdout
    assert 0 < json.loads(epsilon)["epsilon"] < 10
    needs_eval = subprocess.run([dpvip, "bench", "dp-step"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert needs_eval.returncode == 2 and needs_eval.stdout == "", needs_eval
    assert re.fullmatch(
        r"dpvip: error: dpvip bench dp-step needs \S+, which the 'eval' extra installs: "
        r"pip install 'dpvip\[eval\]'\n",
        needs_eval.stderr,
    ), needs_eval.stderr
    print(f"{version}; {epsilon.strip()}; {needs_eval.stderr.strip()}; {time.monotonic() - started:.0f} s")
