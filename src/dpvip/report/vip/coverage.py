"""ViP's numbered tables and figures, each mapped to our outputs or to why it has none."""

from __future__ import annotations

from dpvip.report.claims.coverage_item import (
    vip_item,
    NO_NOISE_MAE,
    EMBEDDED,
    UNPROBED,
    SHOTS,
)

VIP_ITEMS = (
    vip_item(
        "Table",
        "1",
        "Linear probing of ViP and (Syn)-ViP beside DP and non-DP baselines",
        "partly produced",
        ["vip_table1"],
        f"the ViP-ImageNet row: no DP pre-training on ImageNet-1K is configured; {EMBEDDED}{UNPROBED}",
    ),
    vip_item(
        "Table",
        "2",
        "Few-shot fine-tuning (Aircraft, Caltech-101, CIFAR-100) beside baselines",
        "partly produced",
        ["vip_table2"],
        f"{EMBEDDED}{SHOTS}",
    ),
    vip_item(
        "Table", "3", "MAE encoder and decoder sizes and parameter counts of the variants", "produced", ["vip_table3"]
    ),
    vip_item("Table", "4", "COCO detection and segmentation AP, ADE20K mIoU", "produced", ["vip_table4"]),
    vip_item(
        "Table",
        "5",
        "DP fine-tuning on ImageNet-1K from (Syn)-ViP and ViP",
        "partly produced",
        ["vip_table5"],
        "the std column: one DP fine-tuning run per row here, so no std beside the paper's",
    ),
    vip_item(
        "Table",
        "6",
        "Linear probing of ViP and (Syn)-ViP beside a noise-free MAE",
        "partly produced",
        ["vip_table6"],
        f"{NO_NOISE_MAE}; the Dedup-LAION-245M row: no such data here; {EMBEDDED}{UNPROBED}",
    ),
    vip_item(
        "Table",
        "7",
        "Few-shot fine-tuning of ViP and (Syn)-ViP beside a noise-free MAE",
        "partly produced",
        ["vip_table7"],
        f"{NO_NOISE_MAE}; {EMBEDDED}{SHOTS}",
    ),
    vip_item(
        "Table",
        "8",
        "ImageNet-1K linear probing of ViP pre-trained at ε = 2, 4, 8 and ∞",
        "partly produced",
        ["vip_table8"],
        f"the ε = ∞ column: {NO_NOISE_MAE}",
    ),
    vip_item(
        "Table",
        "9",
        "Linear probing of (Syn)-ViP and ViP at three model sizes",
        "partly produced",
        ["vip_table9"],
        "the S, B and L rows: ours are CPU sizes (micro, pico), in rows of their own; " + EMBEDDED + UNPROBED,
    ),
    vip_item(
        "Table",
        "10",
        "Ablation: private dataset size and batch size (σ, downstream accuracy)",
        "partly produced",
        ["vip_table10"],
        "the paper's 2M/23M/233M-image and 8,192/32,768/98,304-batch rows: ours at our sizes, in rows of "
        f"their own; {EMBEDDED}Places-365, iNat-2021 and Aircraft 10-shot columns not evaluated",
    ),
    vip_item(
        "Table",
        "11",
        "Ablation: MAE decoder depth and masking ratio (ImageNet-1K probe)",
        "partly produced",
        ["vip_table11"],
        f"{EMBEDDED}decoder depths 2 and 8 and masking ratio 0.25 not run (ours: depth 1, ratio 0.5)",
    ),
    vip_item(
        "Figure",
        "1",
        "Bars: ViP-L linear probing and ViP-B COCO AP beside other models",
        "partly produced",
        ["vip_figure1"],
        f"{EMBEDDED}our probing bars on the ImageNet-1K stand-in only (Places and iNat not evaluated)",
    ),
    vip_item(
        "Figure",
        "2",
        "Diagram of the two steps (synthetic MAE, then DP-MAE), with synthetic samples",
        "partly produced",
        ["synthetic_samples"],
        "the diagram itself (no result); its synthetic samples are in synthetic_samples",
    ),
    vip_item(
        "Figure",
        "3a",
        "DP-MAE training loss for several private dataset sizes at equal ε",
        "produced",
        ["vip_figure3a"],
    ),
    vip_item(
        "Figure",
        "3b",
        "DP-MAE training loss from (Syn)-ViP against random initialisation",
        "produced",
        ["vip_figure3b"],
        "with a short against a long (Syn)-ViP pre-training, scaled: 2 against 8 epochs (paper: 20 and 900)",
    ),
    vip_item(
        "Figure", "4a", "DP-MAE training loss per model size (synthetic initialisation)", "produced", ["vip_figure4a"]
    ),
    vip_item(
        "Figure", "4b", "DP-MAE training loss per batch size at equal ε and compute", "produced", ["vip_figure4b"]
    ),
    vip_item(
        "Figure",
        "5",
        "Downstream accuracy against model size, synthetic against random init",
        "produced",
        ["vip_figure5"],
    ),
    vip_item("Figure", "6", "ε against DP-MAE iterations at q = 98304/n", "produced", ["vip_figure6"]),
    vip_item(
        "Figure", "7", "DP-MAE training loss per model size from random initialisation", "produced", ["vip_figure7"]
    ),
)
