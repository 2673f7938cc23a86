"""Labelled images for the evaluations: the stratified digits split, ImageFolder trees and
webdataset shards with `cls` labels, all as ImageNet-normalised (n, 3, S, S) tensors."""

import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import webdataset as wds
from PIL import Image

from dpvip.data.images import IMAGENET_MEAN, IMAGENET_STD
from dpvip.data.shard_index import index_shards
from dpvip.errors import DpvipInputError
from dpvip.evaluate.datasets import LabelledImages, digits, image_folder, labelled_shards, labelled_split

MEAN = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
STD = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
DIGITS, DIGITS_TRAIN, DIGITS_TEST = 1797, 1437, 360  # scikit-learn's 1,797 digits, 20% held out


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def unnormalise(images: torch.Tensor) -> torch.Tensor:
    return images * STD + MEAN


# --- digits --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def split32():
    return digits(32)


@pytest.fixture(scope="module")
def split8():
    return digits(8, seed=0)  # at the digits' own 8 px, the bilinear resize is the identity


def test_digits_at_32_px_split_1437_and_360(split32):
    train, test = split32
    assert (len(train), len(test)) == (DIGITS_TRAIN, DIGITS_TEST)
    for part in (train, test):
        assert part.images.shape == (len(part), 3, 32, 32) and part.images.dtype == torch.float32
        assert part.labels.dtype == torch.int64 and part.labels.min() == 0 and part.labels.max() == 9
        assert part.classes == 10 and part.name == "digits"
        grey = unnormalise(part.images)
        assert torch.allclose(grey[:, 0], grey[:, 1], atol=1e-5) and torch.allclose(grey[:, 0], grey[:, 2], atol=1e-5)


def test_digits_are_grey_copied_to_three_channels_and_imagenet_normalised(split8):
    from sklearn.datasets import load_digits

    train, test = split8
    pixels = unnormalise(torch.cat([train.images, test.images]))
    assert torch.allclose(pixels[:, 0], pixels[:, 1], atol=1e-5) and torch.allclose(
        pixels[:, 0], pixels[:, 2], atol=1e-5
    )
    # Values are the digits' 0..16 intensities over 16, and the two parts hold every digit once.
    assert torch.allclose(pixels * 16, (pixels * 16).round(), atol=1e-4)
    assert pixels.min() >= -1e-5 and pixels.max() <= 1 + 1e-5
    ours = sorted(map(tuple, (pixels[:, 0] * 16).round().flatten(1).int().tolist()))
    theirs = sorted(map(tuple, load_digits().images.reshape(DIGITS, 64).astype(int).tolist()))
    assert ours == theirs


def test_the_digits_split_is_stratified(split32):
    train, test = split32
    train_counts, test_counts = (
        np.bincount(train.labels.numpy(), minlength=10),
        np.bincount(test.labels.numpy(), minlength=10),
    )
    assert (train_counts > 0).all() and (test_counts > 0).all()
    # Stratification gives each class its share of the test set, rounded: within 1 example.
    totals = train_counts + test_counts
    assert np.all(np.abs(test_counts - totals * DIGITS_TEST / DIGITS) < 1)
    assert np.all(np.abs(train_counts - totals * DIGITS_TRAIN / DIGITS) < 1)


def test_the_same_seed_gives_the_same_split_and_another_seed_another(split8):
    again = digits(8, seed=0)
    other = digits(8, seed=1)
    for ours, theirs in zip(split8, again):
        assert torch.equal(ours.images, theirs.images) and torch.equal(ours.labels, theirs.labels)
    assert not torch.equal(split8[1].images, other[1].images)
    assert len(other[1]) == DIGITS_TEST


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_a_test_fraction_outside_0_1_is_refused(fraction):
    with pytest.raises(DpvipInputError, match=f"test_fraction {fraction} is outside"):
        digits(8, test_fraction=fraction)


def test_subset_picks_images_and_labels_in_the_given_order():
    images = torch.arange(4, dtype=torch.float32).view(4, 1, 1, 1).expand(4, 3, 2, 2)
    whole = LabelledImages(images, torch.tensor([7, 8, 9, 7]), 10, "toy")
    part = whole.subset([2, 0])
    assert len(part) == 2 and part.classes == 10 and part.name == "toy"
    assert torch.equal(part.labels, torch.tensor([9, 7]))
    assert torch.equal(part.images, images[[2, 0]])
    assert len(whole.subset(np.array([], dtype=np.int64))) == 0


# --- ImageFolder trees ---------------------------------------------------------------------

RED, BLUE = (255, 0, 0), (0, 0, 255)


def solid(colour, size=(20, 30)) -> Image.Image:
    return Image.new("RGB", size, colour)


def normalised(colour) -> torch.Tensor:
    return (torch.tensor(colour, dtype=torch.float32) / 255 - torch.tensor(IMAGENET_MEAN)) / torch.tensor(IMAGENET_STD)


def test_an_image_folder_is_read_with_sorted_class_folders(tmp_path):
    root = tmp_path / "pets"
    (root / "dog").mkdir(parents=True)
    (root / "cat").mkdir()
    solid(BLUE).save(root / "dog" / "d1.png")
    solid(RED, (24, 24)).save(root / "cat" / "c1.png")
    solid(RED, (31, 17)).save(root / "cat" / "c2.jpg", quality=100)
    data = image_folder(root, 16)
    assert data.classes == 2 and data.name == "pets" and len(data) == 3
    assert data.labels.tolist() == [0, 0, 1]  # cat (c1, c2), then dog
    images = data.subset([0, 2]).images
    assert images.shape == (2, 3, 16, 16)
    assert torch.allclose(images[0], normalised(RED).view(3, 1, 1).expand(3, 16, 16), atol=1e-3)
    assert torch.allclose(images[1], normalised(BLUE).view(3, 1, 1).expand(3, 16, 16), atol=1e-3)
    streamed = list(data.batches(2))  # read on demand, in order
    assert [len(labels) for _, labels in streamed] == [2, 1] and torch.equal(streamed[1][0][0], images[1])
    assert image_folder(root, 8, name="other").name == "other"


def test_a_missing_image_folder_is_named(tmp_path):
    with pytest.raises(DpvipInputError, match=f"image folder {tmp_path / 'none'} does not exist"):
        image_folder(tmp_path / "none", 16)


@pytest.mark.parametrize("classes", [[], ["cat"]])  # no class folders; a class folder with no image
def test_an_empty_image_folder_is_refused(tmp_path, classes):
    for name in classes:
        (tmp_path / name).mkdir()
    with pytest.raises(DpvipInputError, match="holds no labelled images"):
        image_folder(tmp_path, 16)


def class_tree(root: Path, classes: list[str]) -> str:
    for i, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        solid((20 * i, 0, 0)).save(root / name / f"{name}.png")
    return str(root)


def test_a_test_folder_missing_a_class_keeps_the_training_labels_and_says_so(tmp_path):
    """Labels by class name: with 'chelsea' absent from test/, 'coffee' stays label 2 (by
    its own folders it would be 1, and every later class would shift: 20% at chance 25%)."""
    spec = {
        "source": "image_folder",
        "train": class_tree(tmp_path / "train", ["astronaut", "chelsea", "coffee", "rocket"]),
        "test": class_tree(tmp_path / "test", ["astronaut", "coffee", "rocket"]),
    }
    train, test, facts = labelled_split("mine", spec, 8)
    assert train.labels.tolist() == [0, 1, 2, 3] and test.labels.tolist() == [0, 2, 3]
    assert test.classes == train.classes == 4
    assert facts == {"train": 4, "test": 3, "classes": 4, "classes_tested": 3, "classes_missing_from_test": ["chelsea"]}


def test_a_test_folder_with_a_class_the_training_split_lacks_is_refused(tmp_path):
    spec = {
        "source": "image_folder",
        "train": class_tree(tmp_path / "train", ["astronaut", "coffee"]),
        "test": class_tree(tmp_path / "test", ["astronaut", "coffee", "rocket"]),
    }
    with pytest.raises(
        DpvipInputError, match=r"image folder .*test has class folder\(s\) rocket that the training split lacks"
    ):
        labelled_split("mine", spec, 8)


# --- webdataset shards ---------------------------------------------------------------------


def png(colour, size=(12, 12)) -> bytes:
    buffer = io.BytesIO()
    solid(colour, size).save(buffer, format="PNG")
    return buffer.getvalue()


def jpeg(colour) -> bytes:
    buffer = io.BytesIO()
    solid(colour).save(buffer, format="JPEG", quality=100)
    return buffer.getvalue()


def write_shard(path: Path, samples: list[dict]) -> Path:
    with wds.TarWriter(str(path), mtime=0) as sink:
        for sample in samples:
            sink.write(sample)
    return path


def good_samples() -> list[dict]:
    return [
        {"__key__": "000000", "png": png(RED), "cls": "2"},
        {"__key__": "000001", "jpg": jpeg(BLUE), "cls": b"0"},
        {"__key__": "000002", "png": b"not an image at all", "cls": "1"},  # corrupt image
        {"__key__": "000003", "png": png(BLUE)},  # no label
        {"__key__": "000004", "png": png(RED, (30, 10)), "cls": "1"},
    ]


@pytest.fixture
def shard_index(tmp_path) -> Path:
    shard = write_shard(tmp_path / "eval-000000.tar", good_samples())
    index_shards([shard], tmp_path / "index.json", "toy", "test", progress=False)
    return tmp_path / "index.json"


def test_labelled_shards_skip_corrupt_and_unlabelled_samples(shard_index):
    data, skipped = labelled_shards(shard_index, 16, classes=3, name="toy")
    assert skipped == 2
    assert data.labels.tolist() == [2, 0, 1] and data.labels.dtype == torch.int64
    assert data.images.shape == (3, 3, 16, 16)
    assert data.classes == 3 and data.name == "toy" and len(data) == 3
    assert torch.allclose(data.images[0], normalised(RED).view(3, 1, 1).expand(3, 16, 16), atol=1e-3)
    assert torch.allclose(data.images[1], normalised(BLUE).view(3, 1, 1).expand(3, 16, 16), atol=2e-2)  # JPEG


def test_labelled_shards_read_a_plain_index_without_member_tables(tmp_path):
    write_shard(tmp_path / "a.tar", good_samples())
    (tmp_path / "index.json").write_text(json.dumps({"shards": [{"file": "a.tar", "samples": 5}]}))
    data, skipped = labelled_shards(tmp_path / "index.json", 8, classes=3, name="toy")
    assert skipped == 2 and data.labels.tolist() == [2, 0, 1]


@pytest.mark.parametrize("label", ["3", "-1"])
def test_a_label_outside_the_classes_is_refused(tmp_path, label):
    samples = good_samples()
    samples[4]["cls"] = label
    write_shard(tmp_path / "a.tar", samples)
    (tmp_path / "index.json").write_text(json.dumps({"shards": [{"file": "a.tar", "samples": 5}]}))
    with pytest.raises(DpvipInputError, match=f"sample 000004 has label {label}, outside 0..2"):
        labelled_shards(tmp_path / "index.json", 8, classes=3, name="toy")


def test_shards_without_any_readable_labelled_image_are_refused(tmp_path):
    write_shard(tmp_path / "a.tar", good_samples()[2:4])
    (tmp_path / "index.json").write_text(json.dumps({"shards": [{"file": "a.tar", "samples": 2}]}))
    with pytest.raises(DpvipInputError, match="no labelled image could be read"):
        labelled_shards(tmp_path / "index.json", 8, classes=3, name="toy")


def test_a_shard_that_disagrees_with_its_index_is_an_error_not_skips(tmp_path):
    write_shard(tmp_path / "a.tar", good_samples())
    write_shard(tmp_path / "b.tar", good_samples()[:2])
    index = {"shards": [{"file": "a.tar", "samples": 5}, {"file": "b.tar", "samples": 3}]}  # b holds 2
    (tmp_path / "index.json").write_text(json.dumps(index))
    with pytest.raises(DpvipInputError, match="holds 2 samples; its index says 3"):
        labelled_shards(tmp_path / "index.json", 8, classes=3, name="toy")


def test_a_folders_digest_follows_the_image_bytes_not_their_size_and_time(tmp_path):
    """An image replaced by another of the same size, its mtime restored, keeps path, size
    and time: the digest (a DP run's noise stream depends on it) must still change."""
    import os

    root = tmp_path / "pets"
    (root / "cat").mkdir(parents=True)
    solid(RED).save(root / "cat" / "c1.png")
    path = root / "cat" / "c1.png"
    before, stat = image_folder(root, 8).digest(), path.stat()
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF  # the same size, other bytes
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and image_folder(root, 8).digest() != before


def test_first_per_class_keeps_the_first_examples_of_each_class_in_order():
    from dpvip.evaluate.datasets import first_per_class

    labels = torch.tensor([0, 1, 0, 2, 1, 0, 2, 2, 2])
    data = LabelledImages(torch.arange(9, dtype=torch.float32).view(9, 1, 1, 1).expand(9, 3, 2, 2), labels, 3, "x")
    kept = first_per_class(data, 2)
    assert kept.indices.tolist() == [0, 1, 2, 3, 4, 6] and kept.labels.tolist() == [0, 1, 0, 2, 1, 2]
    images = torch.cat([batch for batch, _ in kept.batches(4)])
    assert images[:, 0, 0, 0].tolist() == [0, 1, 2, 3, 4, 6]
