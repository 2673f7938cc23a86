import re

import pytest

from dpvip.errors import DpvipInputError
from dpvip.audit.claims import load_claims


def test_claims_cover_every_setting_the_issue_names(root):
    claims = load_claims(root / "config/paper_values/privacy_claims.yaml")
    by_paper = {p: [c for c in claims if c.paper == p] for p in ("vip", "dprandp", "mehta")}
    sources = " ".join(c.source for c in claims)
    for table in ("Table 8", "Table 10", "Table 5", "Table 13", "Table 14", "Table 15", "Table 22", "Table 23"):
        assert table in sources
    assert len(by_paper["vip"]) == 8
    assert len(by_paper["dprandp"]) == 6 + 4 + 3 + 9 + 2
    mehta = by_paper["mehta"]
    assert {c.delta for c in mehta} == {1e-6, 8e-7}
    assert min(c.epsilon for c in mehta) == 0.25 and max(c.epsilon for c in mehta) == 10
    assert all(c.n == 1281167 and not c.sigma_printed for c in mehta)


def test_vip_delta_is_one_over_two_n(root):
    main = next(c for c in load_claims(root / "config/paper_values/privacy_claims.yaml") if c.id == "vip_main")
    assert main.delta == pytest.approx(1 / (2 * 233_000_000))
    assert main.mechanisms == ((98304 / 233_000_000, 0.48, 6100),)


def test_papers_filter(root):
    claims = load_claims(root / "config/paper_values/privacy_claims.yaml", papers=["mehta"])
    assert claims and {c.paper for c in claims} == {"mehta"}


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "claims: [{id: a, paper: p, source: s, setting: x, n: 10, delta: 2, epsilon: 1, accountant: rdp, "
            "mechanisms: [{batch: 1, sigma: 1, steps: 1}]}]",
            "delta 2",
        ),
        (
            "claims: [{id: a, paper: p, source: s, setting: x, n: 10, delta: 0.1, epsilon: 1, accountant: xyz, "
            "mechanisms: [{batch: 1, sigma: 1, steps: 1}]}]",
            "accountant 'xyz'",
        ),
        (
            "claims: [{id: a, paper: p, source: s, setting: x, n: 10, delta: 0.1, epsilon: 1, accountant: rdp, "
            "mechanisms: [{batch: 20, sigma: 1, steps: 1}]}]",
            "sample rate 2.0",
        ),
        ("claims: [{id: a, paper: p}]", "missing key(s)"),
    ],
)
def test_bad_claims_are_named(tmp_path, text, message):
    path = tmp_path / "claims.yaml"
    path.write_text(text)
    with pytest.raises(DpvipInputError, match=re.escape(message)):
        load_claims(path)


def test_missing_claims_file(tmp_path):
    with pytest.raises(DpvipInputError, match="does not exist"):
        load_claims(tmp_path / "nope.yaml")
