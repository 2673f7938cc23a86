"""config/README.md, generated from the configuration schema (config/schema.yaml): every
section in words, then every key with its type, default and meaning. A test keeps the file
equal to what this writes, so the two cannot drift; after changing the schema run

    python -m dpvip.config_docs > config/README.md
"""

from __future__ import annotations

import json
import sys

import yaml

from dpvip.config import schema_text

INTRO = """\
# Configuration

*Generated from `config/schema.yaml` by `python -m dpvip.config_docs`; do not edit by hand.*

The workflow reads `config/config.yaml` (the embedded default: runs on 2 CPU cores without
network) and layers every `--configfile` over it, in order: mappings merge key by key, any
other value (a list, `null`) replaces. Keys set nowhere take the defaults below.

- `config/paper.yaml`: the papers' datasets, models and settings (`--configfile config/paper.yaml`).
- `config/smoke.yaml` over `paper.yaml`: the paper's shapes on generated data, 1-2 steps a job.
- Your site's data: a small overlay of its own, after `paper.yaml`:

  ```
  snakemake --profile profiles/slurm results/tables/vip_table1.csv --configfile config/paper.yaml site.yaml
  ```

  Targets go before `--configfile`, which takes every word after it as a file. A dry run
  (`-n`) names each configured data path that does not exist, with its key.

Paths of the workflow's own files (`paper_values`, `privacy.claims`) are relative to the dpvip
folder; paths of data and checkpoints, to the working directory. A workflow that imports dpvip
as a Snakemake module passes its overlay as the module's `config:` (an empty one: the embedded
default).

In the key column, `<name>` stands for any name you choose (a dataset, a backbone, a task).
"""


def _one_line(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _type(node: dict) -> str:
    if "enum" in node:
        return "one of " + ", ".join(f"`{value}`" for value in node["enum"])
    kinds = node.get("type", "")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "array" in kinds and "items" in node:
        item = node["items"]
        inner = _type(item) if isinstance(item, dict) else ""
        kinds = [f"list ({inner})" if k == "array" and inner else k for k in kinds]
    return " or ".join(k for k in kinds if k)


def _default(node: dict) -> str:
    if "default" not in node:
        return ""
    text = json.dumps(node["default"], separators=(", ", ": "))
    return f"`{text}`" if len(text) <= 60 else "(see config/schema.yaml)"


def _rows(node: dict, path: str) -> list[tuple[str, str, str, str]]:
    """(key, type, default, meaning) of `node`'s keys, depth first, objects before their keys."""
    rows = []
    children = dict(node.get("properties", {}))
    for pattern, child in node.get("patternProperties", {}).items():
        children[f"<{pattern.strip('^$()').replace('|', ' or ')}>"] = child
    if isinstance(node.get("additionalProperties"), dict):
        children["<name>"] = node["additionalProperties"]
    for name, child in children.items():
        key = f"{path}.{name}"
        rows.append((key, _type(child), _default(child), _one_line(child.get("description", ""))))
        rows += _rows(child, key)
    return rows


def config_readme(schema: dict | None = None) -> str:
    """The text of config/README.md for `schema` (default: the package's)."""
    schema = schema or yaml.safe_load(schema_text())
    parts = [INTRO]
    for section, node in schema["properties"].items():
        parts.append(f"## `{section}`\n\n{_one_line(node.get('description', ''))}\n")
        rows = _rows(node, section)
        if not rows:
            parts.append(f"Type: {_type(node)}; default: {_default(node)}.\n")
            continue
        table = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
        table += [f"| `{key}` | {kind} | {default} | {meaning} |" for key, kind, default, meaning in rows]
        parts.append("\n".join(table) + "\n")
    return "\n".join(parts)


if __name__ == "__main__":
    sys.stdout.write(config_readme())
