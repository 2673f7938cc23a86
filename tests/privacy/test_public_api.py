"""`dpvip.privacy`'s public API: every listed name resolves to the object of its module, the
package alone loads no torch (planning code imports its constants), and the engine's
modules import no audit, benchmark or model code."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import dpvip.privacy as privacy

ENGINE = Path(privacy.__file__).parent


def test_every_public_name_resolves_to_its_module_object():
    from dpvip.privacy.ledger import PrivacyLedger
    from dpvip.privacy.step import DPStep

    assert privacy.DPStep is DPStep and privacy.PrivacyLedger is PrivacyLedger
    for name in privacy.__all__:
        assert getattr(privacy, name) is not None, name
    assert set(privacy.__all__) <= set(dir(privacy))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        privacy.Nothing  # noqa: B018


def test_importing_the_package_loads_no_torch():
    code = "import sys, dpvip.privacy as p; p.run_options({}); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_the_docstring_names_every_public_name():
    for name in privacy.__all__:
        assert f"`{name}" in privacy.__doc__ or f"{name}`" in privacy.__doc__ or f" {name}(" in privacy.__doc__, name


def test_the_engine_imports_no_audit_bench_or_model_code():
    for path in ENGINE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dpvip."):
                assert node.module.split(".")[1] in ("privacy", "errors", "memo"), (path.name, node.module)
