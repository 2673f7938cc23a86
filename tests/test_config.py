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


def test_schema_defaults_match_embedded_config_keys(root):
    # Every key in the shipped configs is one the schema knows (typos would fail above).
    for name in ("config.yaml", "paper.yaml"):
        raw = yaml.safe_load((root / "config" / name).read_text())
        validate_config(raw, root / "config/schema.yaml")
