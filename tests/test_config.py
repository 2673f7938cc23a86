import copy
import json
import re

import pytest
import yaml

from dpvip.config import load_config, validate_config
from dpvip.errors import DpvipInputError


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
def test_both_configs_are_valid(root, name):
    config = load_config(root / "config" / name)
    assert config["privacy"]["audit_accountants"]
    assert config["figures"]["vip_figure6"]["sigma"] == 0.48


def test_defaults_are_filled():
    config = validate_config({})
    assert config["scale"] == "embedded"
    assert config["privacy"]["claims"] == "config/paper_values/privacy_claims.yaml"
    assert config["figures"]["vip_figure6"]["steps"] == 6100


@pytest.mark.parametrize(
    "config, message",
    [
        (
            {"privacy": {"audit_accountants": ["rdp", "foo"]}},
            "config key 'privacy.audit_accountants[1]': 'foo' is not one of",
        ),
        ({"figures": {"vip_figure6": {"sigma": -1}}}, "config key 'figures.vip_figure6.sigma': -1"),
        ({"figures": {"vip_figure6": {"steps": "many"}}}, "config key 'figures.vip_figure6.steps': 'many'"),
        ({"privacy": {"audit_papers": []}}, "config key 'privacy.audit_papers'"),
        ({"sclae": "paper"}, "config key 'sclae' is not a known key"),
    ],
)
def test_broken_config_names_the_key(root, config, message):
    with pytest.raises(DpvipInputError, match=re.escape(message)):
        validate_config(config, root / "config/schema.yaml")


def _leaves(value, path=()):
    """(key path, value) of every non-container value; list items by index."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    else:
        yield path, value


def _at(config, path):
    for key in path:
        config = config[key]
    return config


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
def test_shipped_config_values_survive_validation_unchanged(root, name):
    # validate_config fills defaults in place, so validate a copy and compare with the file.
    raw = yaml.safe_load((root / "config" / name).read_text())
    validated = validate_config(copy.deepcopy(raw), root / "config/schema.yaml")
    leaves = list(_leaves(raw))
    assert len(leaves) > 100  # the whole file is walked, not an empty one
    for path, value in leaves:
        assert _at(validated, path) == value, path
        assert type(_at(validated, path)) is type(value), path


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
@pytest.mark.parametrize("path", [("evaluate", "linear_probe", "epochz"), ("dp_transfer", "features", "batchsize")])
def test_shipped_config_with_an_unknown_nested_key_is_refused_by_name(root, name, path):
    config = yaml.safe_load((root / "config" / name).read_text())
    _at(config, path[:-1])[path[-1]] = 1
    with pytest.raises(DpvipInputError, match=re.escape(f"config key '{'.'.join(path)}' is not a known key")):
        validate_config(config, root / "config/schema.yaml")


def test_the_package_schema_is_the_checkouts(root):
    from dpvip.config import schema_text

    assert schema_text() == (root / "config/schema.yaml").read_text()


@pytest.mark.slow
def test_an_installed_wheel_validates_as_a_checkout_does(root, tmp_path):
    """Built and installed elsewhere, without the checkout: the schema comes with it, so the
    defaults are filled and a bad key is refused by name."""
    import shutil
    import subprocess
    import sys
    import zipfile

    # Built from a copy: setuptools writes build/ beside the sources it builds.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(root / name, source / name)
    for name in ("src", "config"):
        shutil.copytree(
            root / name, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
        )
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("dpvip-*.whl")
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    code = (
        "import json, dpvip.config as c\n"
        "from dpvip.errors import DpvipInputError\n"
        "filled = c.validate_config({})\n"
        "try:\n    c.validate_config({'figures': {'vip_figure6': {'sigma': -1}}}); refused = ''\n"
        "except DpvipInputError as err:\n    refused = str(err)\n"
        "print(json.dumps([c.__file__, filled['scale'], refused]))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(tmp_path / 'site')!r}); exec({code!r})"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    where, scale, refused = json.loads(done.stdout)
    assert where.startswith(str(tmp_path / "site")) and scale == "embedded"
    assert refused.startswith("config key 'figures.vip_figure6.sigma': -1")


def test_layering_merges_as_configfile_does_keeping_snakemakes_key_order():
    from dpvip.config import merged

    base = {"a": {"x": 1, "y": [1]}, "b": {"keep": 1}, "c": 3}
    overlay = {"b": None, "a": {"y": [], "z": 2}, "d": 4}
    result = merged(base, overlay)
    assert result == {"b": None, "a": {"y": [], "z": 2, "x": 1}, "d": 4, "c": 3}
    # the overlay's keys first, then the base's others: Snakemake's order, which sections
    # read in order depend on (evaluate.few_shot.datasets: Figure 5 takes the first)
    assert list(result) == ["b", "a", "d", "c"] and list(result["a"]) == ["y", "z", "x"]
    assert base == {"a": {"x": 1, "y": [1]}, "b": {"keep": 1}, "c": 3}  # inputs untouched
