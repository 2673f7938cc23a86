"""The claim catalogues (config/paper_values/claims/<paper>.yaml) against the modules that judge
them: every catalogued key comes out of its module (judged or not tested) and nothing else does;
every claim names its source and the paper's evidence; a claim not tested says why; keys sort
a ... z, aa, ...; the overview holds every claim of the three papers."""

from __future__ import annotations

import pytest
import yaml
from dprandp.test_claims import THREE_SEEDS, paper_like, probe_study
from dprandp.test_tables import fake_results
from mehta.test_claims import all_studies
from vip.test_claims import LOSSES, plan, results
from vip.test_claims import paper_like as vip_like

from dpvip.errors import DpvipInputError
from dpvip.report.dprandp import claims as dprandp_claims
from dpvip.report.mehta import claims as mehta_claims
from dpvip.report.vip import claims as vip_claims
from dpvip.report.claims.catalogue import CATALOGUES, claims_frame, key_order, load_catalogue, overview_frame
from dpvip.report.claims.verdicts import NOT_TESTED

COUNTS = {"vip": 38, "mehta": 38, "dprandp": 40}  # well over the 29 of the abstracts and main results


def dprandp_found(empty: bool):
    if empty:
        return dprandp_claims.dprandp_claims(THREE_SEEDS, {})
    found = fake_results("claims", paper_like, THREE_SEEDS)
    studies = {"dprandp_probe_cifar": probe_study(lambda e: 65 + e), "dprandp_probe_imagenet": probe_study(lambda e: e)}
    return dprandp_claims.dprandp_claims(THREE_SEEDS, found, studies=studies)


PRODUCERS = {
    "vip": lambda empty: vip_claims.vip_claims(plan(), {} if empty else results(vip_like), {} if empty else LOSSES),
    "mehta": lambda empty: mehta_claims.mehta_claims({} if empty else all_studies()),
    "dprandp": dprandp_found,
}
MODULES = {"vip": vip_claims, "mehta": mehta_claims, "dprandp": dprandp_claims}


@pytest.mark.parametrize("paper", COUNTS)
@pytest.mark.parametrize("empty", [True, False])
def test_every_catalogued_claim_and_only_those_come_out_of_its_module(paper, empty):
    found = PRODUCERS[paper](empty)
    keys = [claim.key for claim in found]
    assert keys == MODULES[paper].CATALOGUE.keys() == list(load_catalogue(paper))  # each once, in order
    assert len(keys) == COUNTS[paper]
    for claim in found:
        assert claim.source.strip() and claim.paper_evidence.strip() and claim.statement.strip()
        if claim.verdict.verdict == NOT_TESTED:
            assert len(claim.verdict.reason) > 20, claim.key  # a specific reason, not a blank
    if empty:
        assert {claim.verdict.verdict for claim in found} == {NOT_TESTED}


def test_keys_sort_by_length_then_alphabet():
    keys = list(load_catalogue("vip"))
    assert keys[:3] == ["a", "b", "c"] and keys[25:28] == ["z", "aa", "ab"]
    assert sorted(["aa", "b", "z", "ab", "a"], key=key_order) == ["a", "b", "z", "aa", "ab"]


def test_the_overview_holds_every_claim_of_the_three_papers():
    tables = {
        "ViP": claims_frame(PRODUCERS["vip"](True)),
        "Mehta et al.": claims_frame(PRODUCERS["mehta"](True)),
        "DP-RandP": claims_frame(PRODUCERS["dprandp"](True)),
    }
    overview = overview_frame(tables)
    assert len(overview) == sum(COUNTS.values()) == 116
    assert list(overview[overview["paper"] == "DP-RandP"]["claim"].str.extract(r"^\((\w+)\)")[0][-3:]) == [
        "al",
        "am",
        "an",
    ]


def test_a_judged_claim_quotes_the_papers_effect():
    found = {claim.key: claim for claim in PRODUCERS["dprandp"](False)}
    assert found["i"].paper_effect == pytest.approx(85.26 - 79.5) and "85.26 vs 79.5" in found["i"].paper_evidence
    assert found["h"].paper_effect == pytest.approx(72.79 - 69.48)  # Tab. 11's MoCo row


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"a": {"statement": "x", "source": "Table 1", "evidence": "1 vs 2"}}, "needs exactly"),
        ({"a": {"statement": "x", "source": " ", "evidence": "1 vs 2", "effect": None}}, "empty"),
        ({"A1": {"statement": "x", "source": "Table 1", "evidence": "1 vs 2", "effect": None}}, "lower-case"),
        ({"a": {"statement": "x", "source": "Table 1", "evidence": "1 vs 2", "effect": "big"}}, "a number"),
    ],
)
def test_a_malformed_catalogue_is_refused(tmp_path, entry, message):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(entry))
    with pytest.raises(DpvipInputError, match=message):
        load_catalogue("bad", tmp_path)


def test_the_catalogues_are_the_configs_files():
    assert sorted(path.stem for path in CATALOGUES.glob("*.yaml")) == sorted(COUNTS)
