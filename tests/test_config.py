import copy
import re

import pytest
import yaml

from dpvip.config import load_config, validate_config
from dpvip.errors import DpvipInputError


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
def test_both_configs_are_valid(root, name):
    config = load_config(root / "config" / name, root / "config/schema.yaml")
    assert config["privacy"]["audit_accountants"]
    assert config["figures"]["vip_figure6"]["sigma"] == 0.48


def test_defaults_are_filled(root):
    config = validate_config({}, root / "config/schema.yaml")
    assert config["scale"] == "embedded"
    assert config["privacy"]["claims"] == "config/paper_values/privacy_claims.yaml"
    assert config["figures"]["vip_figure6"]["steps"] == 6100


@pytest.mark.parametrize(
    "config, message",
    [
        ({"privacy": {"audit_accountants": ["rdp", "foo"]}}, "config key 'privacy.audit_accountants[1]': 'foo' is not one of"),
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
