"""The users' data paths the config names, and the dry run's warning for a missing one."""

from __future__ import annotations

import pytest
from conftest import merged_config

from dpvip.errors import DpvipInputError
from dpvip.plan.data_paths import check_labelled_sets, configured_data_paths, missing_data_paths


def test_the_embedded_default_reads_no_user_data():
    assert configured_data_paths(merged_config("config.yaml")) == []


def test_paper_config_names_every_data_key_its_sources_read():
    keys = dict(configured_data_paths(merged_config("config.yaml", "paper.yaml")))
    assert keys["data.laion.shards"] == "/datasets/laion233m/shards"
    assert keys["evaluate.datasets.ImageNet-1K.train"] == "/datasets/imagenet/train"
    assert keys["evaluate.coco.root"] == "/datasets/coco"
    assert keys["evaluate.ade20k.root"] == "/datasets/ADEChallengeData2016"
    assert keys["dprandp.private.tasks.CIFAR-10.data.root"] == "/datasets/cifar10"
    assert keys["dprandp.private.tasks.DermaMNIST.data.path"] == "/datasets/medmnist/dermamnist.npz"
    assert keys["dp_transfer.datasets.CIFAR-100.test"] == "/datasets/cifar100/test"
    assert not any("checkpoint" in key for key in keys)  # the baselines start from random weights


def test_only_missing_paths_are_reported_relative_to_the_working_directory(tmp_path):
    config = merged_config("config.yaml")
    config["evaluate"]["coco"] |= {"source": "coco", "root": "coco"}
    config["evaluate"]["few_shot"]["baselines"]["SimCLR"]["checkpoint"] = "simclr.pt"
    config["dp_transfer"]["backbones"]["mine"] = {"from": "file", "path": "mine.pt", "kind": "mae", "image_size": 32}
    config["synthetic"]["datasets"]["own"] = {"family": "image_folder", "path": "own_images", "images": 8}
    (tmp_path / "coco").mkdir()
    (tmp_path / "simclr.pt").write_bytes(b"")
    assert missing_data_paths(config, tmp_path) == [
        "config key 'synthetic.datasets.own.path': own_images does not exist (the jobs that read it will fail)",
        "config key 'dp_transfer.backbones.mine.path': mine.pt does not exist (the jobs that read it will fail)",
    ]


def test_every_data_key_is_named_when_its_path_is_missing(tmp_path):
    """Each kind of user data the issue lists: LAION's URL list (and shards), evaluate.datasets,
    the COCO and ADE20K roots, DP-RandP task data, dp_transfer.datasets, baseline checkpoints."""
    config = merged_config("config.yaml")
    config["data"]["laion"] |= {"source": "img2dataset", "url_list": "urls.parquet"}
    config["evaluate"]["datasets"]["ImageNet-1K"] = {
        "source": "shards",
        "train": "in/train.json",
        "test": "in/test.json",
    }
    config["evaluate"]["coco"] |= {"source": "coco", "root": "coco"}
    config["evaluate"]["ade20k"] |= {"source": "ade20k", "root": "ade"}
    config["evaluate"]["few_shot"]["baselines"]["SimCLR"]["checkpoint"] = "simclr.pt"
    config["dprandp"]["private"]["tasks"]["CIFAR-10"]["data"] = {"source": "cifar10", "root": "cifar10"}
    config["dp_transfer"]["datasets"]["digits"] = {"source": "image_folder", "train": "tr", "test": "te"}
    missing = "does not exist (the jobs that read it will fail)"
    assert missing_data_paths(config, tmp_path) == [
        f"config key 'data.laion.url_list': urls.parquet {missing}",
        f"config key 'evaluate.datasets.ImageNet-1K.train': in/train.json {missing}",
        f"config key 'evaluate.datasets.ImageNet-1K.test': in/test.json {missing}",
        f"config key 'evaluate.coco.root': coco {missing}",
        f"config key 'evaluate.ade20k.root': ade {missing}",
        f"config key 'evaluate.few_shot.baselines.SimCLR.checkpoint': simclr.pt {missing}",
        f"config key 'dprandp.private.tasks.CIFAR-10.data.root': cifar10 {missing}",
        f"config key 'dp_transfer.datasets.digits.train': tr {missing}",
        f"config key 'dp_transfer.datasets.digits.test': te {missing}",
    ]
    config["data"]["laion"] |= {"source": "shards", "shards": "laion"}
    assert missing_data_paths(config, tmp_path)[0] == f"config key 'data.laion.shards': laion {missing}"
    for path in ("laion", "in", "coco", "ade", "cifar10", "tr", "te"):
        (tmp_path / path).mkdir()
    for path in ("in/train.json", "in/test.json", "simclr.pt"):
        (tmp_path / path).write_text("")
    assert missing_data_paths(config, tmp_path) == []


def test_the_shipped_configs_name_every_split_their_sets_need():
    check_labelled_sets(merged_config("config.yaml"))
    check_labelled_sets(merged_config("config.yaml", "paper.yaml"))  # its folders are not here: not read


@pytest.mark.parametrize("section", ["evaluate", "dp_transfer"])
def test_a_folder_set_without_its_test_split_is_refused_naming_the_key(section):
    config = merged_config("config.yaml")
    config[section]["datasets"]["mine"] = {"source": "image_folder", "train": "images/train"}
    with pytest.raises(
        DpvipInputError,
        match=rf"config key '{section}.datasets.mine.test' is missing: source image_folder needs train, test",
    ):
        check_labelled_sets(config)


def test_a_test_folder_with_a_class_the_train_folder_lacks_is_refused_naming_both(tmp_path):
    for split, classes in (("train", ["astronaut", "coffee"]), ("test", ["astronaut", "coffee", "rocket"])):
        for name in classes:
            (tmp_path / split / name).mkdir(parents=True)
    config = merged_config("config.yaml")
    config["dp_transfer"]["datasets"]["mine"] = {"source": "image_folder", "train": "train", "test": "test"}
    with pytest.raises(
        DpvipInputError,
        match=r"datasets.mine: the test folder test has class folder\(s\) rocket that the train folder train lacks",
    ):
        check_labelled_sets(config, tmp_path)
    (tmp_path / "test" / "rocket").rmdir()
    (tmp_path / "test" / "coffee").rmdir()  # a test split lacking a class is allowed
    check_labelled_sets(config, tmp_path)


def test_a_private_datasets_name_is_its_source_and_where_its_training_split_is_read():
    from dpvip.plan.data_paths import private_data_name

    # ViP's ImageNet entry and Mehta et al.'s, read from one folder, are one dataset.
    vip = {"source": "image_folder", "train": "/data/imagenet/train", "test": "/data/imagenet/val"}
    mehta = {"source": "image_folder", "train": "/data/imagenet/train", "test": "/elsewhere/val", "classes": 1000}
    assert private_data_name(vip) == private_data_name(mehta) == "image_folder /data/imagenet/train"
    assert private_data_name({"source": "cifar10", "root": "/data/cifar"}) == "cifar10 /data/cifar"
    assert private_data_name({"source": "photo_crops", "per_class": 400}) == "photo_crops"
    assert private_data_name({"source": "shards", "shards": "results/data/laion/index.json"}).endswith("index.json")
