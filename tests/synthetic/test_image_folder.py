"""The image_folder and image_shards families: images the user already has (files or
webdataset shards) become a synthetic dataset, sharded, indexed and fingerprinted like a
generated one, and planned into the same rules."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from conftest import run_snakemake
from PIL import Image

from dpvip.errors import DpvipInputError
from dpvip.files import sha256, write_json
from dpvip.synthetic.shards import build_index, read_images, write_shard
from dpvip.synthetic.spec import DatasetSpec
from dpvip.synthetic.summary import dataset_row


def image_folder(folder, count: int):
    """`count` images of assorted sizes and modes (RGB, RGBA, grey; wide and tall), half of
    them in a sub-folder, each a flat colour that encodes its number."""
    modes = ("RGB", "RGBA", "L")
    for number in range(count):
        size = (24 + number, 16) if number % 2 else (16, 20)
        image = Image.new(modes[number % 3], size, color=number * 8 if modes[number % 3] == "L" else (number * 8,) * 3)
        path = folder / ("sub" if number >= count // 2 else "") / f"img{number:03d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        image.save(path)
    return folder


def spec_of(folder, images: int, **changes) -> DatasetSpec:
    values = {"family": "image_folder", "path": str(folder), "images": images, "resolution": 8, "shard_size": 3}
    return DatasetSpec.from_config("mine", values | changes)


def test_a_folder_is_sharded_indexed_and_read_back_in_sorted_order(tmp_path):
    spec = spec_of(image_folder(tmp_path / "images", 7), 7)
    paths = [tmp_path / "out" / f"shard-{shard:06d}.tar" for shard in range(spec.shards)]
    assert [write_shard(spec, shard, path, progress=False) for shard, path in enumerate(paths)] == [3, 3, 1]
    index = build_index(spec, paths)
    assert (index["family"], index["path"], index["total_samples"]) == ("image_folder", str(tmp_path / "images"), 7)
    samples = [sample for path in paths for sample in read_images(path)]
    files = [meta["file"] for _, meta in samples]
    assert files == sorted(files) and files[0] == "img000.png" and files[-1] == "sub/img006.png"
    assert all(image.shape == (8, 8, 3) and image.dtype == np.uint8 for image, _ in samples)
    # image i is file i: its flat colour, whatever its size or mode
    assert [int(image[4, 4, 0]) for image, _ in samples] == [8 * n for n in range(7)]
    # the same folder gives the same bytes: the index fingerprints the images
    again = tmp_path / "again.tar"
    write_shard(spec, 0, again, progress=False)
    assert sha256(again) == sha256(paths[0]) == index["shards"][0]["sha256"]
    # the synthetic_datasets table says what it is: the user's images, standing in for no paper set
    write_json(index, tmp_path / "index.json")
    row = dataset_row(tmp_path / "index.json", [])
    assert (row["stands_in_for"], row["paper_images"]) == (f"the images in {tmp_path / 'images'}", None)


def test_existing_shards_are_read_in_shard_then_tar_order(tmp_path):
    import webdataset as wds

    folder = tmp_path / "released"
    folder.mkdir()
    for shard in range(2):  # written in reverse name order: the numbering is by name
        with wds.TarWriter(str(folder / f"part-{1 - shard}.tar")) as sink:
            for n in range(3):
                number = (1 - shard) * 3 + n
                pixels = np.full((12, 20 if n else 10, 3), number * 8, dtype=np.uint8)
                sink.write({"__key__": f"s{number:03d}", "jpg" if n == 1 else "png": pixels, "cls": b"0"})
    spec = spec_of(folder, 6, family="image_shards", shard_size=4)
    paths = [tmp_path / "out" / f"shard-{shard:06d}.tar" for shard in range(spec.shards)]
    for shard, path in enumerate(paths):
        write_shard(spec, shard, path, progress=False)
    samples = [sample for path in paths for sample in read_images(path)]
    assert [meta["file"] for _, meta in samples][:4] == [
        "part-0.tar/s000.png",
        "part-0.tar/s001.jpg",
        "part-0.tar/s002.png",
        "part-1.tar/s003.png",
    ]
    assert [int(image[4, 4, 0]) for image, _ in samples] == pytest.approx(
        [8 * n for n in range(6)], abs=2
    )  # jpg: lossy
    assert build_index(spec, paths)["total_samples"] == 6
    with pytest.raises(DpvipInputError, match=r"shard folder .*released holds 6 images .* images: 7$"):
        spec_of(folder, 7, family="image_shards").generator()


def test_a_corrupt_shard_among_existing_shards_is_named_with_the_whole_reason(tmp_path):
    folder = tmp_path / "released"
    folder.mkdir()
    (folder / "part-0.tar").write_bytes(b"not a tar archive" * 100)
    with pytest.raises(DpvipInputError) as caught:
        spec_of(folder, 6, family="image_shards").generator()
    assert str(caught.value) == (
        f"synthetic dataset 'mine': shard {folder / 'part-0.tar'} cannot be read as a tar file: file could not be "
        "opened successfully: - method gz: ReadError('not a gzip file'); - method bz2: ReadError('not a bzip2 file'); "
        "- method xz: ReadError('not an lzma file'); - method tar: ReadError('invalid header')"
    )


def test_a_count_that_is_not_the_folders_and_a_missing_folder_are_one_line_errors(tmp_path):
    folder = image_folder(tmp_path / "images", 4)
    with pytest.raises(
        DpvipInputError, match=r"^synthetic dataset 'mine': image folder .* holds 4 images .* images: 5$"
    ):
        spec_of(folder, 5).generator()
    with pytest.raises(DpvipInputError, match=r"^synthetic dataset 'mine': image folder .*nowhere does not exist$"):
        spec_of(tmp_path / "nowhere", 4).generator()


def test_a_path_belongs_to_image_folder_only(tmp_path):
    with pytest.raises(DpvipInputError, match="family image_folder needs a path"):
        DatasetSpec.from_config("mine", {"family": "image_folder", "images": 4, "resolution": 8, "shard_size": 2})
    with pytest.raises(DpvipInputError, match="family dead_leaves generates its images: no path"):
        spec_of(tmp_path, 4, family="dead_leaves")
    plain = DatasetSpec.from_config("leaves", {"family": "dead_leaves", "images": 4, "resolution": 8, "shard_size": 2})
    assert "path" not in plain.describe()  # generated datasets' records keep their form


@pytest.mark.workflow
def test_the_workflow_shards_a_folder_for_phase_one_and_syn_vip(tmp_path):
    image_folder(tmp_path / "images", 256)
    site = tmp_path / "site.yaml"
    mine = {"family": "image_folder", "path": "images", "images": 256, "resolution": 32, "shard_size": 128}
    site.write_text(
        yaml.safe_dump(
            {
                "synthetic": {"datasets": {"mine": mine}},
                "pretrain": {"syn_vip": {"dataset": "mine"}},
                "dprandp": {"phase1": {"dataset": "mine"}},
            }
        )
    )
    planned = run_snakemake(tmp_path, "-n", "--configfile", str(site))
    assert planned.returncode == 0, planned.output
    assert "does not exist" not in planned.output  # images/ is there, relative to the working directory
    reads_mine = {
        rule: ["results/synthetic/mine/" in job.split("\n\n")[0] for job in planned.output.split(f"rule {rule}:")[1:]]
        for rule in ("syn_vip", "dprandp_phase1")
    }
    assert reads_mine["syn_vip"] and all(reads_mine["syn_vip"])  # every (Syn)-ViP size
    assert any(reads_mine["dprandp_phase1"])  # the main Phase I (Table 10's ablations keep their own sets)
    built = run_snakemake(tmp_path, "--cores", "1", "results/synthetic/mine/index.json", "--configfile", str(site))
    assert built.returncode == 0, built.output
    index = json.loads((tmp_path / "results/synthetic/mine/index.json").read_text())
    assert (index["total_samples"], [s["samples"] for s in index["shards"]]) == (256, [128, 128])
