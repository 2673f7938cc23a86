"""Mehta et al.'s numbered tables and figures (panels apart), each mapped to our outputs or to why it has none."""

from __future__ import annotations

from dpvip.report.claims.coverage_item import (
    mehta_item,
    FULL_FINETUNING,
)

MEHTA_ITEMS = (
    mehta_item(
        "Table",
        "1",
        "ImageNet top-1 with DP-SGD and momentum per batch size, with and without DP",
        "partly produced",
        ["mehta_table1"],
        f"last-layer rows only; {FULL_FINETUNING}",
    ),
    mehta_item(
        "Table",
        "2",
        "ImageNet top-1 with DP-LAMB per batch size, with and without DP",
        "partly produced",
        ["mehta_table2"],
        f"last-layer rows only; {FULL_FINETUNING}",
    ),
    mehta_item(
        "Table",
        "3",
        "Larger models and JFT-4B pre-training, DP-LAMB at batch 2^20",
        "partly produced",
        ["mehta_table3"],
        "the JFT networks are not public: rows of our own backbones (last layer) instead; " + FULL_FINETUNING,
    ),
    mehta_item(
        "Table",
        "4",
        "One hyper-parameter changed at a time from the best last-layer setup",
        "produced",
        ["mehta_table4"],
    ),
    mehta_item(
        "Table", "5", "One full-batch DP step of a ViT-B/16 head per ε and dataset", "produced", ["mehta_table5"]
    ),
    mehta_item(
        "Table",
        "6",
        "Pre-training settings and compute of the JFT models",
        "partly produced",
        ["mehta_table6"],
        "the paper's values beside our configuration's; rows of models with no stand-in here keep the paper's only",
    ),
    mehta_item(
        "Table",
        "7",
        "Learning-rate grid of momentum SGD fine-tuning",
        "partly produced",
        ["mehta_table7"],
        "the paper's values beside our configuration's; rows of models with no stand-in here keep the paper's only",
    ),
    mehta_item(
        "Table",
        "8",
        "Learning-rate grids of LAMB fine-tuning",
        "partly produced",
        ["mehta_table8"],
        "the paper's values beside our configuration's; rows of models with no stand-in here keep the paper's only",
    ),
    mehta_item(
        "Table",
        "9",
        "Pre-training settings of the ImageNet-21k ViT-B/16",
        "partly produced",
        ["mehta_table9"],
        "the paper's values beside our configuration's; rows of models with no stand-in here keep the paper's only",
    ),
    mehta_item(
        "Table",
        "10",
        "DP-LAMB training throughput per core, per model",
        "partly produced",
        ["mehta_table10"],
        "our throughput is CPU threads against the paper's TPU cores: only the ratios between models compare",
    ),
    mehta_item(
        "Table",
        "11",
        "Full fine-tuning of ViT-B/16 at the smaller batch sizes 2^15 and 2^16",
        "absent",
        (),
        "full fine-tuning only: not a stage here (heads on cached features only)",
    ),
    mehta_item(
        "Figure",
        "1a",
        "Private against non-private accuracy as model and pre-training data grow",
        "partly produced",
        ["mehta_table3"],
        "no bar chart: its numbers are Table 3's, in mehta_table3 (our backbones, last layer)",
    ),
    mehta_item(
        "Figure",
        "1b",
        "Accuracy against ε of one full-batch last-layer step, beside prior work",
        "produced",
        ["mehta_figure1b"],
    ),
    mehta_item(
        "Figure",
        "2a",
        "LAMB against momentum SGD without privacy, per learning rate",
        "produced",
        ["mehta_figure2"],
        "ours over the configured epochs: one step from zero weights does not depend on the learning rate",
    ),
    mehta_item(
        "Figure", "2b", "Accuracy per input resolution, one private full-batch step", "produced", ["mehta_figure2"]
    ),
    mehta_item(
        "Figure", "2c", "Accuracy per initialisation scale of the last layer, with DP", "produced", ["mehta_figure2"]
    ),
    mehta_item(
        "Figure",
        "3",
        "Accuracy against ε at δ = 8e-7, one full-batch step",
        "produced",
        ["mehta_figure1b"],
        "no figure of its own: the δ = 8e-7 line of mehta_figure1b",
    ),
    mehta_item(
        "Figure",
        "4",
        "Accuracy against ε scored with ImageNet-ReaL labels",
        "absent",
        (),
        "ImageNet-ReaL labels: no such data at any scale here",
    ),
)
