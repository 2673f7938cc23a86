import json
from pathlib import Path

import pytest

from conftest import run_dpvip
from dpvip.errors import DpvipInputError
from dpvip.report.bundle.build import MANIFEST, build_bundle, verify_bundle, write_manifest


def ledger(randomness: str = "secret", **changes) -> dict:
    """A DP run's ledger record, as privacy.json and result files hold it."""
    return {
        "accountant": "rdp",
        "sample_rate": 0.0625,
        "noise_multiplier": 0.8,
        "clip_norm": 0.1,
        "delta": 1 / 4096,
        "steps_done": 16,
        "epsilon_spent": 7.9,
        "examples": 2048,
        "randomness": randomness,
        "private": randomness == "secret",
    } | changes


def make_bundle(tmp_path, randomness: str = "secret", extra: tuple = (), readme: str | None = None) -> Path:
    sources = tmp_path / "sources"
    sources.mkdir(exist_ok=True)
    (sources / "vip_table3.csv").write_text("a,b\n1,2\n")
    (sources / "vip_figure3a.png").write_bytes(b"\x89PNG fake")
    for name in extra:
        (sources / name).write_text("x\n")
    (sources / "privacy.json").write_text(json.dumps(ledger(randomness)))
    bench = tmp_path / "benchmarks" / "rule_x"
    bench.mkdir(parents=True, exist_ok=True)
    (bench / "w.tsv").write_text("s\th:m:s\tmax_rss\n1.50\t0:00:01\t12.3\n")
    (tmp_path / "Snakefile").write_text("rule all:\n    input: []\n")  # the workflow the crate publishes
    out = tmp_path / "bundle"
    build_bundle(
        out,
        {
            "tables": [sources / "vip_table3.csv", *(sources / name for name in extra)],
            "figures": [sources / "vip_figure3a.png"],
        },
        {"k": 1},
        tmp_path,
        tmp_path / "benchmarks",
        {"vip_figure3a": [sources / "privacy.json"]},
        readme=readme,
    )
    return out


@pytest.fixture
def bundle(tmp_path):
    return make_bundle(tmp_path)


def test_bundle_contents_and_provenance(bundle):
    assert (bundle / "tables/vip_table3.csv").is_file() and (bundle / "figures/vip_figure3a.png").is_file()
    record = json.loads((bundle / "provenance.json").read_text())
    assert record["config"] == {"k": 1}
    assert record["packages"]["opacus"] and record["packages"]["torch"]
    assert record["hardware"]["cpus"] >= 1
    assert record["timings"] == [{"job": "rule_x/w", "seconds": 1.5, "max_rss_mb": 12.3}]
    assert set(record["code"]) == {"commit", "dirty"}
    listed = (bundle / MANIFEST).read_text()
    assert "tables/vip_table3.csv" in listed and "provenance.json" in listed and "PRIVACY.md" in listed


def test_verify_passes_then_names_changed_and_missing(bundle):
    assert verify_bundle(bundle).ok
    (bundle / "tables/vip_table3.csv").write_text("tampered\n")
    (bundle / "figures/vip_figure3a.png").unlink()
    (bundle / "extra.txt").write_text("x")
    result = verify_bundle(bundle)
    assert not result.ok
    assert result.changed == ["tables/vip_table3.csv"] and result.missing == ["figures/vip_figure3a.png"]
    assert result.unlisted == ["extra.txt"]  # refused: it could be a file whose line was deleted


def test_cli_verify_exit_codes(bundle):
    ok = run_dpvip("bundle", "verify", str(bundle))
    assert ok.returncode == 0, ok.stdout
    assert "privacy status" in ok.stdout and "NOT PRIVATE" not in ok.stdout
    assert "ro-crate-metadata.json: the bundle as a Workflow Run RO-Crate" in ok.stdout
    (bundle / "tables/vip_table3.csv").write_text("tampered\n")
    bad = run_dpvip("bundle", "verify", str(bundle))
    assert bad.returncode == 1 and "changed: tables/vip_table3.csv" in bad.stdout


def test_verify_without_manifest(tmp_path):
    assert verify_bundle(tmp_path).missing == [MANIFEST]


def test_rebuilding_replaces_old_files(bundle, tmp_path):
    (bundle / "stale.txt").write_text("old")
    build_bundle(bundle, {"tables": [bundle.parent / "sources/vip_table3.csv"]}, {}, tmp_path, tmp_path / "benchmarks")
    assert not (bundle / "stale.txt").exists() and verify_bundle(bundle).ok


def test_the_statement_gives_every_file_its_status_and_mechanisms(bundle):
    statement = json.loads((bundle / "privacy.json").read_text())
    assert statement["private"] and "note" not in statement
    by_output = {entry["output"]: entry for entry in statement["outputs"]}
    assert set(by_output) == {"vip_table3", "vip_figure3a", "provenance", "Snakefile", "config", "ro-crate-metadata"}
    # provenance: its DP jobs' times follow their realised Poisson batches (outside the guarantee)
    assert {o for o in by_output if by_output[o]["private_data"]} == {"vip_figure3a", "provenance"}
    assert by_output["provenance"]["inside_guarantee"] == "no"
    curve = by_output["vip_figure3a"]
    assert curve["private_data"] and curve["inside_guarantee"] == "no" and "without noise" in curve["why"]
    (mechanism,) = curve["mechanisms"]
    assert mechanism["q"] == 0.0625 and mechanism["sigma"] == 0.8 and mechanism["steps"] == 16
    assert mechanism["epsilon"] == 7.9 and mechanism["delta_n"] == 0.5 and mechanism["runs"] == 1
    assert not curve["delta_at_least_1_over_n"]
    text = (bundle / "PRIVACY.md").read_text()
    assert "vip_figure3a | no |" in text and "q = 0.0625, sigma = 0.8, T = 16" in text


def test_a_file_without_a_status_is_not_published(tmp_path):
    with pytest.raises(DpvipInputError, match="no privacy status for published output 'mystery'"):
        make_bundle(tmp_path, extra=("mystery.csv",))
    assert not (tmp_path / "bundle").exists()


def test_verify_fails_on_a_published_file_the_statement_does_not_list(bundle):
    statement = json.loads((bundle / "privacy.json").read_text())
    statement["outputs"] = [e for e in statement["outputs"] if e["output"] != "vip_figure3a"]
    (bundle / "privacy.json").write_text(json.dumps(statement))
    write_manifest(bundle)  # consistent hashes: only the statement is wrong
    result = verify_bundle(bundle)
    assert not result.ok and result.unstated == ["figures/vip_figure3a.png"]


def test_a_seeded_bundle_says_it_is_not_private_and_fails_verification_unless_allowed(tmp_path):
    bundle = make_bundle(tmp_path, randomness="seeded")
    statement = json.loads((bundle / "privacy.json").read_text())
    assert not statement["private"] and statement["note"].startswith("NOT PRIVATE")
    assert "NOT PRIVATE" in (bundle / "PRIVACY.md").read_text()
    assert not verify_bundle(bundle).ok and verify_bundle(bundle, allow_not_private=True).ok
    refused = run_dpvip("bundle", "verify", str(bundle))
    assert refused.returncode == 1 and "refused (--allow-not-private accepts it)" in refused.stdout
    allowed = run_dpvip("bundle", "verify", str(bundle), "--allow-not-private")
    assert (
        allowed.returncode == 0
        and "allowed by --allow-not-private" in allowed.stdout
        and "NOT PRIVATE" in allowed.stdout
    )


def test_a_delta_of_at_least_one_over_n_is_flagged(tmp_path):
    from dpvip.report.privacy.statement import build_statement

    statement = build_statement(["figures/vip_figure3a.png"], {"vip_figure3a": [{"privacy": ledger(delta=1e-3)}]})
    (entry,) = statement["outputs"]
    assert entry["delta_at_least_1_over_n"] and entry["mechanisms"][0]["delta_n"] == pytest.approx(2.048)


def test_cli_verify_missing_directory(tmp_path):
    done = run_dpvip("bundle", "verify", str(tmp_path / "nope"))
    assert done.returncode == 2 and "does not exist" in done.stderr


def _unlist(bundle, name: str) -> None:
    """Delete `name`'s line from the manifest (the attack: hide a changed file)."""
    lines = (bundle / MANIFEST).read_text().splitlines()
    (bundle / MANIFEST).write_text("".join(f"{line}\n" for line in lines if not line.endswith(f"  {name}")))


@pytest.mark.parametrize("name", ["tables/vip_table3.csv", "PRIVACY.md"])
def test_a_changed_file_whose_manifest_line_was_deleted_fails(bundle, name):
    (bundle / name).write_text("rewritten\n")
    _unlist(bundle, name)
    result = verify_bundle(bundle)
    assert not result.ok and result.unlisted == [name] and not result.changed
    refused = run_dpvip("bundle", "verify", str(bundle))
    assert refused.returncode == 1 and f"not in manifest: {name}" in refused.stdout


def test_a_seeded_bundle_without_its_note_is_still_refused(tmp_path):
    """The note removed (and its manifest line, so the hashes agree): the statement's fields and
    its mechanisms' recorded randomness still say seeded."""
    bundle = make_bundle(tmp_path, randomness="seeded")
    statement = json.loads((bundle / "privacy.json").read_text())
    del statement["note"]
    (bundle / "privacy.json").write_text(json.dumps(statement))
    write_manifest(bundle)
    result = verify_bundle(bundle)
    assert not result.ok and "mechanisms with randomness seeded" in result.not_private
    assert verify_bundle(bundle, allow_not_private=True).ok
    statement |= {"randomness": "secret", "private": True}  # the fields rewritten too: the mechanisms remain
    (bundle / "privacy.json").write_text(json.dumps(statement))
    write_manifest(bundle)
    assert verify_bundle(bundle).not_private == "mechanisms with randomness seeded"
