import json

import pytest

from conftest import run_dpvip
from dpvip.report.bundle import MANIFEST, build_bundle, verify_bundle


@pytest.fixture
def bundle(tmp_path):
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "t.csv").write_text("a,b\n1,2\n")
    (sources / "f.png").write_bytes(b"\x89PNG fake")
    bench = tmp_path / "benchmarks" / "rule_x"
    bench.mkdir(parents=True)
    (bench / "w.tsv").write_text("s\th:m:s\tmax_rss\n1.50\t0:00:01\t12.3\n")
    out = tmp_path / "bundle"
    build_bundle(
        out,
        {"tables": [sources / "t.csv"], "figures": [sources / "f.png"]},
        {"k": 1},
        tmp_path,
        tmp_path / "benchmarks",
    )
    return out


def test_bundle_contents_and_provenance(bundle):
    assert (bundle / "tables/t.csv").is_file() and (bundle / "figures/f.png").is_file()
    record = json.loads((bundle / "provenance.json").read_text())
    assert record["config"] == {"k": 1}
    assert record["packages"]["opacus"] and record["packages"]["torch"]
    assert record["hardware"]["cpus"] >= 1
    assert record["timings"] == [{"job": "rule_x/w", "seconds": 1.5, "max_rss_mb": 12.3}]
    assert set(record["code"]) == {"commit", "dirty"}
    listed = (bundle / MANIFEST).read_text()
    assert "tables/t.csv" in listed and "provenance.json" in listed


def test_verify_passes_then_names_changed_and_missing(bundle):
    assert verify_bundle(bundle).ok
    (bundle / "tables/t.csv").write_text("tampered\n")
    (bundle / "figures/f.png").unlink()
    (bundle / "extra.txt").write_text("x")
    result = verify_bundle(bundle)
    assert not result.ok
    assert result.changed == ["tables/t.csv"] and result.missing == ["figures/f.png"]
    assert result.unlisted == ["extra.txt"]


def test_cli_verify_exit_codes(bundle):
    ok = run_dpvip("bundle", "verify", str(bundle))
    assert ok.returncode == 0, ok.stdout
    (bundle / "tables/t.csv").write_text("tampered\n")
    bad = run_dpvip("bundle", "verify", str(bundle))
    assert bad.returncode == 1 and "changed: tables/t.csv" in bad.stdout


def test_verify_without_manifest(tmp_path):
    assert verify_bundle(tmp_path).missing == [MANIFEST]


def test_rebuilding_replaces_old_files(bundle, tmp_path):
    (bundle / "stale.txt").write_text("old")
    build_bundle(bundle, {"tables": [bundle.parent / "sources/t.csv"]}, {}, tmp_path, tmp_path / "benchmarks")
    assert not (bundle / "stale.txt").exists() and verify_bundle(bundle).ok


def test_cli_verify_missing_directory(tmp_path):
    done = run_dpvip("bundle", "verify", str(tmp_path / "nope"))
    assert done.returncode == 2 and "does not exist" in done.stderr
