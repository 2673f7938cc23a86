"""The bundle's ro-crate-metadata.json: a Workflow Run Crate that roc-validator passes (offline,
see crate_validation.py), listed in the manifest, with the run's workflow, input and outputs."""

import json
import os

import pytest

from crate_validation import issues, seed_cache, validate_crate
from dpvip.report.bundle.build import MANIFEST, verify_bundle
from dpvip.report.bundle.provenance import run_started
from bundle.test_build import make_bundle

# RECOMMENDED checks the crate does not meet, and why: no public URL of the workflow is known;
# the validator wants every SoftwareSourceCode's id absolute, where Workflow RO-Crate makes the
# main workflow a file of the crate (a relative id); who ran the workflow, and who authors and
# publishes a bundle, is the person's to add, not the workflow's to guess.
UNMET_RECOMMENDATIONS = {
    "Application url",
    "SoftwareApplication id",
    "Action agent",
    "Root Data Entity: `author` property",
    "Root Data Entity: `publisher` property",
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return seed_cache(tmp_path_factory.mktemp("roc-validator") / "http_cache")


@pytest.fixture
def bundle(tmp_path):
    return make_bundle(tmp_path, readme="# dpvip results bundle\n")


def graph(bundle) -> dict:
    return {entity["@id"]: entity for entity in json.loads((bundle / "ro-crate-metadata.json").read_text())["@graph"]}


def test_the_crate_describes_the_run(bundle):
    entities = graph(bundle)
    root = entities["./"]
    assert root["mainEntity"] == {"@id": "workflow/Snakefile"} and root["license"]
    assert {"@id": "https://w3id.org/ro/wfrun/workflow/0.5"} in root["conformsTo"]
    workflow = entities["workflow/Snakefile"]
    assert workflow["@type"] == ["File", "SoftwareSourceCode", "ComputationalWorkflow"]
    assert entities[workflow["programmingLanguage"]["@id"]]["name"] == "Snakemake"
    run = entities[root["mentions"]["@id"]]
    assert run["@type"] == "CreateAction" and run["instrument"] == {"@id": "workflow/Snakefile"}
    assert run["object"] == {"@id": "workflow/config.yaml"}
    results = {ref["@id"] for ref in run["result"]}
    assert {"tables/vip_table3.csv", "figures/vip_figure3a.png", "provenance.json", "PRIVACY.md"} <= results
    assert not results & {"ro-crate-metadata.json", MANIFEST, "workflow/Snakefile", "workflow/config.yaml"}
    record = json.loads((bundle / "provenance.json").read_text())
    assert run["endTime"] == record["created"] and run["startTime"] == record["started"]
    assert (bundle / "workflow/config.yaml").read_text() == "k: 1\n"


def test_the_crate_is_in_the_manifest_and_verified(bundle):
    assert "  ro-crate-metadata.json\n" in (bundle / MANIFEST).read_text()
    result = verify_bundle(bundle)
    assert result.ok and result.crate and not result.unlisted


def test_roc_validator_passes_the_crate(bundle, cache):
    result = validate_crate(bundle, cache, "REQUIRED")
    assert result.passed(), issues(result)
    recommended = validate_crate(bundle, cache, "RECOMMENDED")
    unmet = {issue.check.name for issue in recommended.get_issues()}
    assert unmet <= UNMET_RECOMMENDATIONS, issues(recommended)


def test_roc_validator_fails_a_crate_without_its_workflow(bundle, cache):
    crate = json.loads((bundle / "ro-crate-metadata.json").read_text())
    root = next(entity for entity in crate["@graph"] if entity["@id"] == "./")
    del root["mainEntity"]
    (bundle / "ro-crate-metadata.json").write_text(json.dumps(crate))
    result = validate_crate(bundle, cache, "REQUIRED")
    assert not result.passed()
    # Workflow RO-Crate's check, and Workflow Run Crate's (an action's instrument is the main entity)
    assert {"Main Workflow file must exist", "Main entity execution"} <= {i.check.name for i in result.get_issues()}


def test_the_run_started_when_its_first_job_did(tmp_path):
    for name, seconds, ended in (("a.tsv", 1.5, 1_700_000_001.5), ("b.tsv", 10.0, 1_700_000_100.0)):
        (tmp_path / name).write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:00:01\t12.3\n")
        os.utime(tmp_path / name, (ended, ended))
    assert run_started(tmp_path) == "2023-11-14T22:13:20+00:00"
    assert run_started(tmp_path / "none") is None
