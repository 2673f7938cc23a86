"""The LAION-format data stage in the workflow: dry runs for each source (the paper's shards
are only read when the job runs), config errors before any job, and a small real run whose
lost shard is regenerated alone with the same bytes and an identical index."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from dpvip.data.shard_reader import ShardReader
from dpvip.files import sha256
from conftest import run_snakemake
from test_workflow import job_counts

ROOT = Path(__file__).resolve().parents[2]
INDEX = "results/data/laion/index.json"
pytestmark = pytest.mark.workflow


def _config(tmp_path: Path, laion: str) -> str:
    path = tmp_path / "data.yaml"
    path.write_text("data:\n  laion:\n" + "".join(f"    {line}\n" for line in laion.strip().splitlines()))
    return str(path)


def test_dry_run_embedded_writes_the_natural_stand_in_one_job_per_shard(tmp_path):
    laion = yaml.safe_load((ROOT / "config/config.yaml").read_text())["data"]["laion"]
    done = run_snakemake(tmp_path, "-n", INDEX)
    assert done.returncode == 0, done.output
    assert job_counts(done.output) == {
        "laion_natural_shard": math.ceil(laion["images"] / laion["shard_size"]),
        "laion_index": 1,
    }


def test_dry_run_paper_indexes_shards_it_does_not_have(tmp_path):
    assert not Path("/datasets/laion233m/shards").exists()
    done = run_snakemake(tmp_path, "-n", INDEX, "--configfile", str(ROOT / "config/paper.yaml"))
    assert done.returncode == 0, done.output
    assert job_counts(done.output) == {"laion_index": 1}


def test_dry_run_img2dataset_downloads_in_one_job(tmp_path):
    config = _config(tmp_path, "source: img2dataset\nurl_list: /nowhere/laion400m-meta")
    done = run_snakemake(tmp_path, "-n", INDEX, "--configfile", config)
    assert done.returncode == 0, done.output
    assert job_counts(done.output) == {"laion_download": 1}


@pytest.mark.parametrize(
    "laion, message",
    [
        (
            "source: laion5b",
            "config key 'data.laion.source': 'laion5b' is not one of ['natural', 'img2dataset', 'shards']",
        ),
        ("source: img2dataset", "config key 'data.laion.url_list': source 'img2dataset' needs it"),
        ("source: shards", "config key 'data.laion.shards': source 'shards' needs it"),
        ("images: null", "config key 'data.laion.images': source 'natural' needs it"),
        ("resize_mode: stretch", "config key 'data.laion.resize_mode': 'stretch' is not one of"),
    ],
)
def test_a_bad_data_config_stops_before_any_job_in_one_line(tmp_path, laion, message):
    done = run_snakemake(tmp_path, "-n", INDEX, "--configfile", _config(tmp_path, laion))
    assert done.returncode != 0
    assert message in done.output and "\n" not in message
    assert "Job stats" not in done.output


@pytest.mark.slow
def test_natural_shards_then_indexing_them_where_they_lie(tmp_path):
    natural = tmp_path / "natural"
    natural.mkdir()
    # 512 crops: the embedded DP pre-training checks its batch against the dataset's size
    config = _config(natural, "images: 512\nresolution: 16\nshard_size: 192")
    done = run_snakemake(natural, "--cores", "2", INDEX, "--configfile", config)
    assert done.returncode == 0, done.output
    assert job_counts(done.output) == {"laion_natural_shard": 3, "laion_index": 1}
    index = natural / INDEX
    assert len(ShardReader.from_index(index)) == 512

    # A lost shard, asked for by name (rule all would list every shard), is regenerated alone
    # with the same bytes; the index made again comes out identical.
    lost = "results/data/laion/shard-000001.tar"
    shard = natural / lost
    before, index_before = sha256(shard), index.read_bytes()
    shard.unlink()
    redo = run_snakemake(natural, "--cores", "2", lost, INDEX, "--configfile", config)
    assert redo.returncode == 0, redo.output
    assert job_counts(redo.output) == {"laion_natural_shard": 1, "laion_index": 1}
    assert sha256(shard) == before and index.read_bytes() == index_before

    # The same shards indexed where they lie, as the paper config does with LAION's.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = _config(elsewhere, f"source: shards\nshards: {natural / 'results/data/laion'}\nchecksums: false")
    done = run_snakemake(elsewhere, "--cores", "1", INDEX, "--configfile", config)
    assert done.returncode == 0, done.output
    reader = ShardReader.from_index(elsewhere / INDEX)
    original = ShardReader.from_index(index)
    assert all(path.is_absolute() for path in reader.paths)
    assert len(reader) == 512 and all(reader[i] == original[i] for i in range(0, 512, 7))

    # Nothing to do again, until a shard in the user's folder is rewritten in place (same
    # name, same path in the config): its content digest reruns the index (it used not to).
    again = run_snakemake(elsewhere, "-n", INDEX, "--configfile", config)
    assert again.returncode == 0 and "Nothing to be done" in again.output, again.output
    shard.write_bytes(shard.read_bytes())  # rewritten: a new modification time
    again = run_snakemake(elsewhere, "-n", INDEX, "--configfile", config)
    assert again.returncode == 0 and job_counts(again.output) == {"laion_index": 1}, again.output
