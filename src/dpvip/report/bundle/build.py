"""The results bundle: copies of tables and figures, provenance, the privacy statement
(PRIVACY.md, privacy.json: what each file reveals of the private data), the workflow and its
configuration, the Workflow Run RO-Crate metadata (ro-crate-metadata.json) and a SHA-256
manifest. Only files the statement gives a status are published."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from dpvip.files import read_json, read_text, sha256
from dpvip.report.bundle.crate import CONFIG, CRATE, WORKFLOW, add_workflow, write_crate
from dpvip.report.bundle.front_page import README
from dpvip.report.privacy.statement import STATEMENT_FILES, build_statement, stated_files, write_statement
from dpvip.report.bundle.provenance import provenance

MANIFEST = "MANIFEST.sha256"


def write_manifest(bundle: Path) -> Path:
    """Hash every file under `bundle` (sha256sum format, sorted paths) into MANIFEST.sha256."""
    files = sorted(p for p in bundle.rglob("*") if p.is_file() and p.name != MANIFEST)
    lines = [f"{sha256(p)}  {p.relative_to(bundle).as_posix()}\n" for p in files]
    manifest = bundle / MANIFEST
    manifest.write_text("".join(lines))
    return manifest


def build_bundle(
    bundle: str | Path,
    sections: dict[str, list[str | Path]],
    config: dict,
    workflow_dir: str | Path,
    benchmarks_dir: str | Path,
    sources: dict[str, list[str | Path]] | None = None,
    readme: str | None = None,
) -> Path:
    """Assemble `bundle`: each section's files copied to `bundle/<section>/`, then
    provenance.json, the privacy statement (from `sources`: {output: the result files it was
    built from}), the README (`readme`: the claims and coverage first), the workflow's
    Snakefile and `config`, the RO-Crate metadata over all of these, then the manifest over
    everything (the crate's metadata included). An existing bundle is replaced, so the
    manifest never lists files of an older run."""
    bundle = Path(bundle)
    if bundle.exists():
        shutil.rmtree(bundle)
    files = [f"{section}/{Path(path).name}" for section, paths in sections.items() for path in paths]
    # outputs share their runs (DP-RandP's tables read the same result files): each read once
    sources = sources or {}
    unique = {str(path) for paths in sources.values() for path in paths}
    read = {path: json.loads(Path(path).read_text()) for path in unique}
    records = {output: [read[str(path)] for path in paths] for output, paths in sources.items()}
    extra = ["provenance.json", WORKFLOW, CONFIG, CRATE, *([README] if readme is not None else [])]
    statement = build_statement([*files, *extra], records)  # refuses a file without a status first
    for section, paths in sections.items():
        target = bundle / section
        target.mkdir(parents=True, exist_ok=True)
        for source in paths:
            shutil.copy2(source, target / Path(source).name)
    record = provenance(config, workflow_dir, benchmarks_dir)
    (bundle / "provenance.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    write_statement(bundle, statement)
    if readme is not None:
        (bundle / README).write_text(readme)
    add_workflow(bundle, workflow_dir, config)
    write_crate(bundle, record, MANIFEST)
    return write_manifest(bundle)


@dataclass
class Verification:
    missing: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)  # in the bundle, not in the manifest: refused
    unstated: list[str] = field(default_factory=list)  # published without a privacy status
    not_private: str | None = None  # why the bundle's DP runs are not private (seeded), if they are not
    allow_not_private: bool = False  # a seeded bundle passes only when asked (tests, reproductions)
    crate: bool = False  # ro-crate-metadata.json is in the manifest (bundles before it have none)

    @property
    def ok(self) -> bool:
        refused = bool(self.not_private) and not self.allow_not_private
        return not (self.missing or self.changed or self.unlisted or self.unstated or refused)


def verify_bundle(bundle: str | Path, allow_not_private: bool = False) -> Verification:
    """Compare every file listed in the manifest with its hash; a file it does not name fails
    the bundle (a deleted manifest line would otherwise hide a changed file). A bundle of
    seeded (not private) runs fails unless `allow_not_private`: seeded is read from every
    mechanism's recorded randomness and the statement's fields, not from its note alone."""
    bundle = Path(bundle)
    manifest = bundle / MANIFEST
    result = Verification(allow_not_private=allow_not_private)
    if not manifest.is_file():
        result.missing.append(MANIFEST)
        return result
    listed = set()
    for number, line in enumerate(read_text(manifest, "manifest").splitlines(), start=1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            result.changed.append(f"{MANIFEST} (line {number} is malformed)")
            continue
        listed.add(name)
        path = bundle / name
        if not path.is_file():
            result.missing.append(name)
        elif sha256(path) != digest:
            result.changed.append(name)
    present = {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()}
    result.unlisted = sorted(present - listed - {MANIFEST})
    result.crate = CRATE in listed
    statement_file = bundle / "privacy.json"
    if not statement_file.is_file():
        result.missing.append("privacy.json")
        return result
    statement = read_json(statement_file, "privacy statement")
    result.unstated = sorted(present - stated_files(statement) - {MANIFEST, *STATEMENT_FILES})
    result.not_private = not_private(statement)
    return result


def not_private(statement: dict) -> str | None:
    """Why a privacy statement's runs are not private, or None: a mechanism whose randomness
    is not `secret`, a statement whose `randomness` or `private` field says so, or its note."""
    modes = {
        mechanism.get("randomness")
        for output in statement.get("outputs", [])
        for mechanism in output.get("mechanisms", [])
    }
    reasons = []
    if modes - {"secret"}:
        reasons.append(f"mechanisms with randomness {', '.join(sorted(str(m) for m in modes - {'secret'}))}")
    # `private` is false also where no DP run is behind the bundle: then there is nothing to keep
    if statement.get("randomness") != "secret" or (modes and statement.get("private") is not True):
        reasons.append(f"randomness {statement.get('randomness')!r}, private {statement.get('private')!r}")
    if statement.get("note"):
        reasons.append(str(statement["note"]))
    return "; ".join(reasons) or None
