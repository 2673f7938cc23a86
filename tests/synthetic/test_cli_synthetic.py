"""`dpvip synthetic generate` (shards + index.json, resumable, one-line errors with exit 2)
and `dpvip bench synthetic` (JSON records)."""

import hashlib
import json

import pytest

from conftest import run_dpvip

GENERATE = (
    "synthetic",
    "generate",
    "--family",
    "dead_leaves",
    "--images",
    "30",
    "--resolution",
    "16",
    "--shard-size",
    "10",
)
SHARDS = [f"shard-{s:06d}.tar" for s in range(3)]


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_resuming_with_other_settings_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "leaves"
    assert run_dpvip(*GENERATE, "--shards", "0", "--out", str(out)).returncode == 0
    other = run_dpvip(*GENERATE, "--seed", "1", "--out", str(out))
    assert other.returncode == 2
    assert other.stderr.strip().splitlines() == [
        f"dpvip: error: {out} holds a dataset generated with other settings ({out / 'dataset.json'}); "
        "use another output folder"
    ]
    assert sorted(p.name for p in out.iterdir()) == ["dataset.json", SHARDS[0]]


@pytest.mark.slow
def test_generate_writes_shards_and_index_and_regenerates_only_a_missing_shard(tmp_path):
    out = tmp_path / "leaves"
    done = run_dpvip(*GENERATE, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted([*SHARDS, "dataset.json", "index.json"])
    index = json.loads((out / "index.json").read_text())
    assert index["total_samples"] == 30 and [s["samples"] for s in index["shards"]] == [10, 10, 10]
    assert [s["sha256"] for s in index["shards"]] == [sha256(out / name) for name in SHARDS]

    digests = {name: sha256(out / name) for name in SHARDS}
    mtimes = {name: (out / name).stat().st_mtime_ns for name in SHARDS}
    (out / SHARDS[1]).unlink()
    again = run_dpvip(*GENERATE, "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert f"{out / SHARDS[0]}: exists, kept" in again.stdout
    assert f"{out / SHARDS[2]}: exists, kept" in again.stdout
    for name in (SHARDS[0], SHARDS[2]):
        assert (out / name).stat().st_mtime_ns == mtimes[name], f"{name} was rewritten"
    assert sha256(out / SHARDS[1]) == digests[SHARDS[1]]  # the same bytes as in the first run
    assert json.loads((out / "index.json").read_text()) == index
    assert not list(out.glob("*.partial"))


@pytest.mark.parametrize(
    "changes, named",
    [
        ({"--family": "dead_leafs"}, "dead_leafs"),
        ({"--images": "0"}, "images must be a positive integer (got 0)"),
        ({"--family": "stylegan_oriented", "--resolution": "48"}, "(got 48)"),
        ({"--option": "mix=6"}, "option 'mix' does not apply to dead_leaves"),
        ({"--option": "mix"}, "'mix' is not KEY=VALUE"),
    ],
)
def test_generate_bad_input_exits_2_with_one_line(tmp_path, changes, named):
    args = dict(zip(GENERATE[2::2], GENERATE[3::2])) | changes
    done = run_dpvip("synthetic", "generate", *[x for kv in args.items() for x in kv], "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], done.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_generate_to_a_folder_under_a_file_exits_2_naming_it(tmp_path):
    (tmp_path / "afile").write_text("a file, not a folder")
    target = tmp_path / "afile" / "sub"
    done = run_dpvip(*GENERATE, "--out", str(target))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(target) in lines[0], done.stderr


def test_generate_negative_seed_exits_2_with_one_line(tmp_path):
    # The spec accepts --seed -1, then numpy's SeedSequence raises inside the renderer.
    done = run_dpvip(*GENERATE, "--seed", "-1", "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "seed" in lines[0], done.stderr[-2000:]


def test_bench_synthetic_prints_json_records():
    done = run_dpvip(
        "bench",
        "synthetic",
        "--families",
        "dead_leaves",
        "--resolutions",
        "16",
        "--images",
        "8",
        "--processes",
        "1",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    records = json.loads(done.stdout)
    assert len(records) == 1  # one process, and no unbatched row for dead leaves
    record = records[0]
    assert (record["family"], record["resolution"], record["images"]) == ("dead_leaves", 16, 8)
    assert record["seconds"] > 0 and record["images_per_second"] > 0
    assert record["images_per_second"] == pytest.approx(8 / record["seconds"])
