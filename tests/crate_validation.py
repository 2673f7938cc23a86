"""roc-validator (`rocrate_validator`) on a bundle's crate, without the network.

The validator fetches the crate's JSON-LD context (https://w3id.org/ro/crate/1.1/context)
through its HTTP cache, and in offline mode reads it from that cache only. The tests fill a
cache of their own with a local context, as an online run would have: ro-crate-py ships the
RO-Crate 1.3 context, which holds every 1.1 term; the terms whose IRIs changed after 1.1 are
set back to 1.1's, so the workflow is typed bioschemas:ComputationalWorkflow as the profile's
shapes expect."""

from __future__ import annotations

import io
import json
from importlib import resources
from pathlib import Path

from requests.adapters import HTTPAdapter
from urllib3 import HTTPResponse

CONTEXT_URL = "https://w3id.org/ro/crate/1.1/context"
# RO-Crate 1.1's IRIs for the terms 1.3 maps elsewhere.
CHANGED_SINCE_1_1 = {
    "ComputationalWorkflow": "https://bioschemas.org/ComputationalWorkflow",
    "FormalParameter": "https://bioschemas.org/FormalParameter",
    "input": "https://bioschemas.org/ComputationalWorkflow#input",
    "output": "https://bioschemas.org/ComputationalWorkflow#output",
    "cite-as": "https://www.w3.org/ns/iana/link-relations/relation#cite-as",
}


def context_1_1() -> dict:
    shipped = json.loads(resources.files("rocrate").joinpath("data/ro-crate.jsonld").read_text())
    return {"@id": CONTEXT_URL, "@context": shipped["@context"] | CHANGED_SINCE_1_1}


class _LocalDocuments(HTTPAdapter):
    """Answers GETs for the documents it holds; anything else is a 404 (never the network)."""

    def __init__(self, documents: dict[str, dict]):
        super().__init__()
        self.documents = documents

    def send(self, request, **kwargs):
        document = self.documents.get(request.url)
        raw = HTTPResponse(
            body=io.BytesIO(json.dumps(document or {}).encode()),
            headers={"Content-Type": "application/ld+json"},
            status=200 if document is not None else 404,
            preload_content=False,
            request_url=request.url,
        )
        return self.build_response(request, raw)


def seed_cache(cache: Path) -> Path:
    """A requests-cache SQLite cache (the validator's backend) holding the RO-Crate 1.1 context."""
    from requests_cache import CachedSession

    session = CachedSession(str(cache), backend="sqlite", expire_after=-1, allowable_codes=(200,))
    session.mount("https://", _LocalDocuments({CONTEXT_URL: context_1_1()}))
    assert session.get(CONTEXT_URL).status_code == 200
    session.close()
    return cache


def validate_crate(bundle: Path, cache: Path, severity: str = "REQUIRED"):
    """The validator's result for `bundle` against the Workflow Run Crate profile (with the
    profiles it extends), offline, reading the context from `cache` (see `seed_cache`)."""
    from rocrate_validator import services
    from rocrate_validator.models import ValidationSettings

    settings = ValidationSettings(
        rocrate_uri=str(bundle),
        profile_identifier="workflow-run-crate",
        requirement_severity=severity,
        offline=True,
        cache_path=cache,
    )
    return services.validate(settings)


def issues(result) -> list[str]:
    """Each issue as the validator names it: severity, check, message."""
    return [f"[{i.severity.name}] {i.identifier} {i.check.name}: {i.message}" for i in result.get_issues()]
