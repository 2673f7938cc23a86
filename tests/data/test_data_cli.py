"""`dpvip data natural|ingest|index`: each writes a readable index and says what it holds;
bad input is one line on stderr and exit status 2."""

from __future__ import annotations

import json

import pytest

from conftest import run_dpvip
from dpvip.data.shard_reader import ShardReader
from shard_data import IMAGES, shard_paths, small_index  # noqa: F401  (fixture)


@pytest.mark.slow
def test_natural_writes_shards_and_an_index_and_a_rerun_keeps_them(tmp_path):
    out = tmp_path / "laion"
    args = (
        "data",
        "natural",
        "--out",
        str(out),
        "--images",
        "12",
        "--resolution",
        "16",
        "--shard-size",
        "5",
        "--seed",
        "2",
    )
    done = run_dpvip(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{out / 'index.json'}: 12 samples in 3 shards (stand-in for LAION-233M (ViP))"
    reader = ShardReader.from_index(out / "index.json")
    assert len(reader) == 12 and set(reader[11]) == {"__key__", "jpg", "txt", "json"}
    shards = {path: path.stat().st_mtime_ns for path in out.glob("shard-*.tar")}
    again = run_dpvip(*args)
    assert again.returncode == 0, again.stderr
    assert {path: path.stat().st_mtime_ns for path in shards} == shards


def test_index_of_a_read_only_folder_goes_elsewhere_without_checksums(small_index, tmp_path):
    target = tmp_path / "index.json"
    done = run_dpvip(
        "data", "index", str(small_index.parent), "--out", str(target), "--no-checksums", "--name", "shaders"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{target}: {IMAGES} samples in 3 shards"
    index = json.loads(target.read_text())
    assert index["dataset"] == "shaders" and index["checksums"] is False
    assert [entry["file"] for entry in index["shards"]] == [str(path.resolve()) for path in shard_paths(small_index)]
    assert len(ShardReader.from_index(target)) == IMAGES


@pytest.mark.parametrize(
    "args, message",
    [
        ("index {tmp}/none", "shard folder {tmp}/none does not exist"),
        ("ingest --urls {tmp}/urls.csv --out {tmp}/out", "URL list {tmp}/urls.csv does not exist"),
        (
            "ingest --urls {tmp}/links.csv --out {tmp}/out",
            "URL list {tmp}/links.csv has no column 'url' (columns: link)",
        ),
        ("ingest --urls {tmp}/links.csv --out {tmp}/out --resize-mode fit", "resize mode 'fit' is not one of"),
        ("natural --out {tmp}/n --images 0 --resolution 8", "argument --images: must be a positive integer (got 0)"),
        ("natural --out {tmp}/n --images 4 --resolution 8 --seed -1", "seed must be a non-negative integer (got -1)"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    (tmp_path / "links.csv").write_text("link\nhttp://127.0.0.1/a.png\n")
    done = run_dpvip("data", *args.format(tmp=tmp_path).split())
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert message.format(tmp=tmp_path) in done.stderr


def test_a_corrupt_shard_is_one_error_line_naming_it_with_the_whole_reason(tmp_path):
    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "00000.tar").write_bytes(b"not a tar archive" * 100)
    done = run_dpvip("data", "index", str(folder))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]  # beside the progress bar
    assert errors == [
        f"dpvip: error: shard {folder / '00000.tar'} cannot be read as a tar file: file could not be opened "
        "successfully: - method gz: ReadError('not a gzip file'); - method bz2: ReadError('not a bzip2 file'); "
        "- method xz: ReadError('not an lzma file'); - method tar: ReadError('invalid header')"
    ]
