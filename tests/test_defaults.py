"""One source for defaults: a key the configuration leaves out gets the same value whether
the workflow fills it (config/schema.yaml) or a settings class does (the `dpvip` command
line, the library); and the conda environment of cluster jobs lists the package's
dependencies and those of its `eval` and `workflow` extras."""

from __future__ import annotations

import dataclasses
import importlib
import re
import tomllib

import pytest
import yaml

# schema section -> the settings class that reads it
SETTINGS = {
    "pretrain.syn_vip": "dpvip.plan.pretrain:PretrainSettings",
    "dp_pretrain.settings": "dpvip.plan.dp_pretrain:DPPretrainSettings",
    "evaluate.few_shot": "dpvip.evaluate.finetune:FinetuneSettings",
    "evaluate.coco": "dpvip.evaluate.detection:DetectionSettings",
    "evaluate.ade20k": "dpvip.evaluate.segmentation:SegmentationSettings",
    "evaluate.dp_finetune": "dpvip.evaluate.dp_finetune:DPFinetuneSettings",
    "dprandp.phase1": "dpvip.plan.dprandp_phase1:Phase1Settings",
    "dprandp.private": "dpvip.plan.dprandp_private:PrivateSettings",
    "privacy.empirical": "dpvip.audit.bounds:AuditSettings",
}
# Keys the workflow needs to build a job but which only the configuration knows: the
# settings classes take them as required arguments (the schema's defaults are the paper's).
REQUIRED = {"epochs", "batch_size", "steps"}


def schema_section(root, path: str) -> dict:
    node = yaml.safe_load((root / "config/schema.yaml").read_text())
    for part in path.split("."):
        node = node["properties"][part]
    return node["properties"]


def as_config(value):
    """A default as YAML would hold it: tuples as lists, dataclasses as mappings."""
    if dataclasses.is_dataclass(value):
        return {key: as_config(item) for key, item in dataclasses.asdict(value).items()}
    if isinstance(value, tuple):
        return [as_config(item) for item in value]
    return value


@pytest.mark.parametrize("section", sorted(SETTINGS))
def test_schema_and_settings_class_defaults_agree(root, section):
    module, name = SETTINGS[section].split(":")
    cls = getattr(importlib.import_module(module), name)
    properties = schema_section(root, section)
    compared = 0
    for field in dataclasses.fields(cls):
        if field.name not in properties or "default" not in properties[field.name]:
            continue
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            assert field.name in REQUIRED, f"{name}.{field.name} has no default, the schema has one"
            continue
        ours = field.default if field.default is not dataclasses.MISSING else field.default_factory()
        schema = properties[field.name]["default"]
        if dataclasses.is_dataclass(ours):  # a nested choice: the schema gives some of its keys
            ours = {key: value for key, value in as_config(ours).items() if key in schema}
        assert as_config(ours) == schema, f"{section}.{field.name}: schema {schema!r}, {name} {ours!r}"
        compared += 1
    assert compared >= 5, f"only {compared} defaults of {section} compared: is the mapping still right?"


def requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[;]", requirement.strip(), maxsplit=1)[0].lower()


def test_the_cluster_environment_lists_the_packages_dependencies(root):
    """envs/dpvip.yaml (conda, for `--sdm conda`) runs jobs: every dependency of the package
    and of its `eval` and `workflow` extras with the same version bounds, except Snakemake and
    its executor, which run the workflow."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    required = {*project["dependencies"], *extras["eval"], *extras["workflow"]}
    environment = yaml.safe_load((root / "envs/dpvip.yaml").read_text())["dependencies"]
    pip = next(entry["pip"] for entry in environment if isinstance(entry, dict))
    for_jobs = sorted({r.replace(" ", "") for r in required if not requirement_name(r).startswith("snakemake")})
    assert sorted(r.replace(" ", "") for r in pip) == for_jobs


def test_an_extra_gives_a_package_the_bounds_every_other_gives_it(root):
    """A package listed by two extras (pyyaml: `eval` and `workflow`) is listed alike, and no
    extra lists a core dependency again."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    core = {requirement_name(r) for r in project["dependencies"]}
    seen: dict[str, str] = {}
    for extra, requirements in project["optional-dependencies"].items():
        for requirement in requirements:
            name = requirement_name(requirement)
            assert name not in core, f"extra {extra} lists {name}, a core dependency"
            assert seen.setdefault(name, requirement) == requirement, f"{name}: {seen[name]} and {requirement}"
