"""LAION ingestion with img2dataset against a loopback HTTP server: the good images become
samples of the shards, each kind of failure is counted with its reason, and the index reads
back with ShardReader. Bad URL lists are refused in one line naming the file or column."""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from PIL import Image

from dpvip.data.laion import IngestSettings, check_url_list, ingest
from dpvip.data.shard_reader import ShardReader
from dpvip.errors import DpvipInputError

GOOD = {"red.png": (40, 50), "noise.jpg": (60, 60), "wide.png": (24, 80), "tall.jpg": (90, 30)}  # name: (height, width)
IMAGE_SIZE = 32


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output clean
        pass


def _write_images(folder) -> None:
    rng = np.random.default_rng(0)
    for name, shape in GOOD.items():
        Image.fromarray(rng.integers(0, 256, (*shape, 3), dtype=np.uint8)).save(folder / name)
    (folder / "not_an_image.jpg").write_bytes(b"this is text, not a JPEG\n" * 20)


def _closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def url_list(tmp_path_factory):
    """A csv of 4 good images and 3 broken URLs (404, not an image, refused connection),
    served from 127.0.0.1 while the module's tests run."""
    www = tmp_path_factory.mktemp("www")
    _write_images(www)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(www)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    urls = [f"{base}/{name}" for name in GOOD]
    urls += [f"{base}/missing.png", f"{base}/not_an_image.jpg", f"http://127.0.0.1:{_closed_port()}/refused.jpg"]
    path = tmp_path_factory.mktemp("urls") / "urls.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["url", "caption"])
        writer.writerows([url, f"caption {n}"] for n, url in enumerate(urls))
    yield path
    server.shutdown()


@pytest.fixture(scope="module")
def ingested(url_list, tmp_path_factory):
    out = tmp_path_factory.mktemp("laion")
    settings = IngestSettings(image_size=IMAGE_SIZE, resize_mode="center_crop", threads=4, shard_size=4, timeout=5)
    temporary = tmp_path_factory.mktemp("tmpdir")  # the user's TMPDIR, which img2dataset must not litter
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(temporary)
    try:
        index = ingest(url_list, out, settings, progress=False)
    finally:
        if before is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = before
    return out, index, temporary


@pytest.mark.slow
def test_an_ingest_leaves_no_temporary_files(ingested):
    # img2dataset's workers make two wandb folders each in TMPDIR; they get a scratch one.
    out, _, temporary = ingested
    assert list(temporary.iterdir()) == []
    assert [path.name for path in out.iterdir() if path.name.startswith(".")] == []  # the scratch is gone


@pytest.mark.slow
def test_good_images_become_samples_and_failures_are_counted_by_reason(ingested):
    out, index, _ = ingested
    assert index["source"] == "img2dataset" and index["total_samples"] == len(GOOD)
    assert index["attempted"] == 7
    failures = index["failures"]
    assert (failures["count"], failures["failed_to_download"], failures["failed_to_resize"]) == (3, 2, 1)
    assert sorted(failures["reasons"].values()) == [1, 1, 1]
    reasons = " | ".join(failures["reasons"])
    assert "404" in reasons and "refused" in reasons.lower() and "decod" in reasons.lower()
    assert [shard["file"] for shard in index["shards"]] == ["shards/00000.tar", "shards/00001.tar"]
    assert json.loads((out / "index.json").read_text()) == index


@pytest.mark.slow
def test_the_index_reads_back_with_the_images_and_their_captions(ingested):
    out, index, _ = ingested
    reader = ShardReader.from_index(out / "index.json")
    assert len(reader) == len(GOOD)
    served = {}
    for position in range(len(reader)):
        sample = reader[position]
        meta = json.loads(sample["json"])
        assert meta["status"] == "success" and sample["txt"].decode() == meta["caption"]
        with Image.open(io.BytesIO(sample["jpg"])) as image:
            assert image.size == (IMAGE_SIZE, IMAGE_SIZE)
        served[meta["url"].rsplit("/", 1)[1]] = (meta["original_height"], meta["original_width"])
    assert served == GOOD


def test_a_missing_url_list_is_named(tmp_path):
    with pytest.raises(DpvipInputError, match=f"URL list {tmp_path / 'urls.csv'} does not exist"):
        ingest(tmp_path / "urls.csv", tmp_path / "out", progress=False)


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_a_url_list_without_the_url_column_is_named(tmp_path, suffix):
    import pandas

    frame = pandas.DataFrame({"link": ["http://127.0.0.1/a.png"], "caption": ["a"]})
    path = tmp_path / f"urls.{suffix}"
    frame.to_csv(path, index=False) if suffix == "csv" else frame.to_parquet(path)
    with pytest.raises(DpvipInputError) as caught:
        check_url_list(path, IngestSettings())
    assert str(caught.value) == f"URL list {path} has no column 'url' (columns: link, caption)"


def test_captions_are_optional_and_a_txt_list_has_none(tmp_path):
    (tmp_path / "captioned.csv").write_text("url,caption\nhttp://127.0.0.1/a.png,a\n")
    (tmp_path / "bare.csv").write_text("url\nhttp://127.0.0.1/a.png\n")
    (tmp_path / "urls.txt").write_text("http://127.0.0.1/a.png\n")
    assert check_url_list(tmp_path / "captioned.csv", IngestSettings()) == ("csv", "caption")
    assert check_url_list(tmp_path / "bare.csv", IngestSettings()) == ("csv", None)
    assert check_url_list(tmp_path / "urls.txt", IngestSettings()) == ("txt", None)


def test_a_folder_of_url_lists_is_checked_file_by_file(tmp_path):
    """As LAION-400M ships: parquet parts with columns URL and TEXT."""
    import pandas

    laion = IngestSettings(url_column="URL", caption_column="TEXT")
    for part in range(2):
        pandas.DataFrame({"URL": ["http://127.0.0.1/a.png"], "TEXT": ["a"]}).to_parquet(
            tmp_path / f"part-{part}.parquet"
        )
    assert check_url_list(tmp_path, laion) == ("parquet", "TEXT")
    pandas.DataFrame({"url": ["http://127.0.0.1/a.png"]}).to_parquet(tmp_path / "part-2.parquet")
    with pytest.raises(DpvipInputError, match=f"URL list {tmp_path / 'part-2.parquet'} has no column 'URL'"):
        check_url_list(tmp_path, laion)
