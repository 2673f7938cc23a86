"""Snakemake workflow catalog conformance: its metadata file, and config/README.md, which
documents every section and key of the schema (generated from it, so they cannot drift)."""

from __future__ import annotations

import copy

import yaml

from dpvip.config import schema_text
from dpvip.config_docs import config_readme


def test_config_readme_is_what_the_schema_generates(root):
    assert (root / "config" / "README.md").read_text() == config_readme(), (
        "config/README.md is stale: python -m dpvip.config_docs > config/README.md"
    )


def test_every_section_is_described_and_every_key_is_listed():
    schema = yaml.safe_load(schema_text())
    readme = config_readme(schema)
    for section, node in schema["properties"].items():
        assert node.get("description"), f"schema section '{section}' has no description"
        assert f"## `{section}`\n\n{' '.join(node['description'].split())}" in readme
    assert "| `privacy.empirical.canaries` | integer | `12800` | canaries per run (even) |" in readme
    assert "| `dprandp.private.tasks.<CIFAR-10 or CIFAR-100 or DermaMNIST>.data.root` |" in readme
    changed = copy.deepcopy(schema)
    changed["properties"]["bundle"]["properties"]["keep"] = {"type": "boolean", "default": True, "description": "x"}
    assert "| `bundle.keep` | boolean | `true` | x |" in config_readme(changed)


def test_catalog_metadata_names_what_the_workflow_has(root):
    catalog = yaml.safe_load((root / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert catalog["software-stack-deployment"]["conda"] is True and (root / "envs" / "dpvip.yaml").is_file()
    assert catalog["report"] is True and (root / "report" / "workflow.rst").is_file()
    flags = catalog["mandatory-flags"]["flags"].split()
    assert (root / flags[flags.index("--profile") + 1]).is_dir()
    assert (root / flags[flags.index("--configfile") + 1]).is_file()
