"""Configuration validation against the schema (config/schema.yaml, shipped in the package
as dpvip/schema.yaml: an installed wheel validates as a checkout does), with defaults filled in.

Errors name the offending key and the problem in one line, e.g.
``config key 'privacy.audit_accountants[1]': 'foo' is not one of ['rdp', 'prv', 'pld']``.
"""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from dpvip.errors import DpvipInputError, first_line


def _with_defaults(validator_class):
    """A validator that also writes schema defaults into the instance (jsonschema FAQ recipe)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(name, _copy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def _copy(value):
    return yaml.safe_load(yaml.safe_dump(value))


def _key(path) -> str:
    key = ""
    for part in path:
        key += f"[{part}]" if isinstance(part, int) else (f".{part}" if key else str(part))
    return key or "(top level)"


def schema_text() -> str:
    """The package's configuration schema."""
    return resources.files("dpvip").joinpath("schema.yaml").read_text()


def validate_config(config: dict, schema_path: str | Path | None = None) -> dict:
    """Validate `config` in place against the package's schema (or `schema_path`), fill
    defaults, and return it; raise one clear error."""
    schema = yaml.safe_load(Path(schema_path).read_text() if schema_path else schema_text())
    validator_class = jsonschema.validators.validator_for(schema)
    validator = _with_defaults(validator_class)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is None:
        return config
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        key = _key([*error.absolute_path, unknown[0]])
        raise DpvipInputError(f"config key '{key}' is not a known key here (known: {', '.join(allowed)})")
    raise DpvipInputError(f"config key '{_key(error.absolute_path)}': {error.message}")
    return config


def yaml_reason(err: yaml.YAMLError) -> str:
    """What PyYAML found wrong and where, on one line ("while parsing a flow sequence, expected
    ',' or ']', but got '<stream end>' (line 3, column 1)"); its first line alone is only the context."""
    problem = getattr(err, "problem", None)
    if not problem:
        return first_line(err)
    context = getattr(err, "context", None)
    mark = getattr(err, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"{context + ', ' if context else ''}{problem}{where}"


def read_config_file(path: str | Path, what: str = "config file", keys: str = "config keys") -> dict:
    """A YAML file of `keys` (a config file, a settings file) as a mapping, or one line
    saying why it is not one."""
    from dpvip.files import read_text

    try:
        values = yaml.safe_load(read_text(path, what)) or {}
    except yaml.YAMLError as err:
        raise DpvipInputError(f"{what} {path} is not YAML: {yaml_reason(err)}") from None
    if not isinstance(values, dict):
        raise DpvipInputError(f"{what} {path} holds a {type(values).__name__}, not a mapping of {keys}")
    return values


def load_config(path: str | Path, schema_path: str | Path | None = None) -> dict:
    """One config file alone, validated (defaults filled)."""
    return validate_config(read_config_file(path), schema_path)


def embedded_config() -> dict:
    """The embedded default, config/config.yaml (shipped in the package as embedded_config.yaml,
    a link to it: an installed wheel layers over the same file as a checkout)."""
    return yaml.safe_load(resources.files("dpvip").joinpath("embedded_config.yaml").read_text())


def merged(base: dict, overlay: dict) -> dict:
    """`overlay` over `base` as Snakemake merges --configfile over the workflow's configfile:
    mappings key by key, any other value (a list, null) replaces the base's. Keys keep
    Snakemake's order too, the overlay's first, then those only the base has: some sections
    are read in order (few_shot.datasets: Figure 5 uses the first)."""
    result = copy.deepcopy(overlay)  # not _copy: a YAML round trip sorts the keys
    for key, value in base.items():
        if key not in result:
            result[key] = copy.deepcopy(value)
        elif isinstance(value, dict) and isinstance(result[key], dict):
            result[key] = merged(value, result[key])
    return result


def layered_config(overlay: dict) -> dict:
    """`overlay` layered over the embedded default, then validated: the configuration the
    workflow runs with `--configfile` (or as a module given `overlay`), for the command line
    and for a workflow that imports dpvip with a partial config or none."""
    return validate_config(merged(embedded_config(), overlay))
