"""The numbered tables and figures of ViP, Mehta et al. and DP-RandP, each mapped to our
output stems or to the reason it has none: the data `dpvip.report.coverage` tabulates.

One `Item` per numbered table or figure (a figure's labelled panels are items of their own
where the paper labels them, as Mehta et al.'s 1a and 1b, or where we draw them apart, as
ViP's 4a and 4b). A wrong entry stops at import.
"""

from __future__ import annotations

from dataclasses import dataclass

PAPERS = ("ViP", "Mehta et al.", "DP-RandP")
KINDS = ("Table", "Figure")
STATUSES = ("produced", "partly produced", "planned", "absent")
CAPTION_LENGTH = 80
TITLE = "Coverage: every numbered table and figure of the three papers, and our output for it"
# Figure stems without "figure" in their name; any other stem is a figure when it has one.
FIGURE_STEMS = ("synthetic_samples", "syn_vip_loss", "syn_vip_reconstructions")
# Our outputs that no numbered item of the papers shows (said in the notes, so none is lost).
UNNUMBERED = (
    "privacy_audit",
    "privacy_empirical",
    "synthetic_datasets",
    "vip_dp_runs",
    "dprandp_claims",
    "vip_claims",
    "mehta_claims",
    "claims",
    "coverage",
    "syn_vip_loss",
    "syn_vip_reconstructions",
)


@dataclass(frozen=True)
class Item:
    paper: str  # one of PAPERS
    kind: str  # "Table" or "Figure"
    number: str  # as the paper numbers it: "3", "1a"
    caption: str  # what it shows, in our words (at most CAPTION_LENGTH characters)
    status: str  # one of STATUSES
    outputs: tuple[str, ...] = ()  # our output stems (results/tables or results/figures)
    reason: str = ""  # required unless produced: what is missing, or why

    def __post_init__(self) -> None:
        # A wrong entry stops at import, so the table can never print an unknown status.
        if self.paper not in PAPERS or self.kind not in KINDS or self.status not in STATUSES:
            raise ValueError(f"{self.label}: unknown paper, kind or status ({self.paper}, {self.kind}, {self.status})")
        if not self.caption or len(self.caption) > CAPTION_LENGTH:
            raise ValueError(f"{self.label}: the caption must have 1 to {CAPTION_LENGTH} characters")
        if self.status != "produced" and not self.reason:
            raise ValueError(f"{self.label}: a {self.status} item needs a reason")
        if self.status != "absent" and not self.outputs:
            raise ValueError(f"{self.label}: a {self.status} item names its output")

    @property
    def label(self) -> str:
        return f"{self.paper} {self.kind} {self.number}"


def _vip(kind: str, number: str, caption: str, status: str, outputs=(), reason: str = "") -> Item:
    return Item("ViP", kind, number, caption, status, tuple(outputs), reason)


def _mehta(kind: str, number: str, caption: str, status: str, outputs=(), reason: str = "") -> Item:
    return Item("Mehta et al.", kind, number, caption, status, tuple(outputs), reason)


def _randp(kind: str, number: str, caption: str, status: str, outputs=(), reason: str = "") -> Item:
    return Item("DP-RandP", kind, number, caption, status, tuple(outputs), reason)


# The noise-free MAE of ViP's Tables 6-8 is the paper's own run (App. B.4: DP-AdamW from
# (Syn)-ViP with sigma 0, q = 4096/n, T = 60,000), not the released MAE of Table 4.
_NO_NOISE_MAE = "the noise-free MAE run from (Syn)-ViP (App. B.4: σ 0, q 4096/n, T 60k) is not a run here"
_FULL_FINETUNING = "full fine-tuning rows: not a stage here (heads on cached features only)"
_SWEEP = (
    "Phase II-length sweep at ε = {}: ours sweeps at one ε (Figure 6's, ε = 1); "
    "the paper's values are drawn as dashed lines in dprandp_figure6"
)
# What the embedded config (config/config.yaml) leaves to the paper's values alone; "produced"
# means every printed column and every row of the paper's own runs has ours beside it.
_EMBEDDED = "embedded config: "
_UNPROBED = "Places-365, Places-205 and iNat-2021 columns not evaluated (config/paper.yaml evaluates them)"
_SHOTS = "few-shot columns other than CIFAR-100 10-shot not evaluated (config/paper.yaml evaluates all nine)"


def _epsilons(missing: str, ours: str = "1 and 8") -> str:
    """The reason of a DP-RandP item whose ε columns (or points) are ours only at the embedded schedule's."""
    return f"{_EMBEDDED}ours at ε = {ours} only; ε = {missing}: the paper's values alone"


_SETTINGS = (
    "in the notes of {}: our total steps, Phase II steps and σ per ε beside the paper's; "
    "the learning rates are config values (config/paper.yaml), not printed"
)

VIP_ITEMS = (
    _vip(
        "Table",
        "1",
        "Linear probing of ViP and (Syn)-ViP beside DP and non-DP baselines",
        "partly produced",
        ["vip_table1"],
        f"the ViP-ImageNet row: no DP pre-training on ImageNet-1K is configured; {_EMBEDDED}{_UNPROBED}",
    ),
    _vip(
        "Table",
        "2",
        "Few-shot fine-tuning (Aircraft, Caltech-101, CIFAR-100) beside baselines",
        "partly produced",
        ["vip_table2"],
        f"{_EMBEDDED}{_SHOTS}",
    ),
    _vip(
        "Table", "3", "MAE encoder and decoder sizes and parameter counts of the variants", "produced", ["vip_table3"]
    ),
    _vip("Table", "4", "COCO detection and segmentation AP, ADE20K mIoU", "produced", ["vip_table4"]),
    _vip(
        "Table",
        "5",
        "DP fine-tuning on ImageNet-1K from (Syn)-ViP and ViP",
        "partly produced",
        ["vip_table5"],
        "the std column: one DP fine-tuning run per row here, so no std beside the paper's",
    ),
    _vip(
        "Table",
        "6",
        "Linear probing of ViP and (Syn)-ViP beside a noise-free MAE",
        "partly produced",
        ["vip_table6"],
        f"{_NO_NOISE_MAE}; the Dedup-LAION-245M row: no such data here; {_EMBEDDED}{_UNPROBED}",
    ),
    _vip(
        "Table",
        "7",
        "Few-shot fine-tuning of ViP and (Syn)-ViP beside a noise-free MAE",
        "partly produced",
        ["vip_table7"],
        f"{_NO_NOISE_MAE}; {_EMBEDDED}{_SHOTS}",
    ),
    _vip(
        "Table",
        "8",
        "ImageNet-1K linear probing of ViP pre-trained at ε = 2, 4, 8 and ∞",
        "partly produced",
        ["vip_table8"],
        f"the ε = ∞ column: {_NO_NOISE_MAE}",
    ),
    _vip(
        "Table",
        "9",
        "Linear probing of (Syn)-ViP and ViP at three model sizes",
        "partly produced",
        ["vip_table9"],
        "the S, B and L rows: ours are CPU sizes (micro, pico), in rows of their own; " + _EMBEDDED + _UNPROBED,
    ),
    _vip(
        "Table",
        "10",
        "Ablation: private dataset size and batch size (σ, downstream accuracy)",
        "partly produced",
        ["vip_table10"],
        "the paper's 2M/23M/233M-image and 8,192/32,768/98,304-batch rows: ours at our sizes, in rows of "
        f"their own; {_EMBEDDED}Places-365, iNat-2021 and Aircraft 10-shot columns not evaluated",
    ),
    _vip(
        "Table",
        "11",
        "Ablation: MAE decoder depth and masking ratio (ImageNet-1K probe)",
        "partly produced",
        ["vip_table11"],
        f"{_EMBEDDED}decoder depths 2 and 8 and masking ratio 0.25 not run (ours: depth 1, ratio 0.5)",
    ),
    _vip(
        "Figure",
        "1",
        "Bars: ViP-L linear probing and ViP-B COCO AP beside other models",
        "partly produced",
        ["vip_figure1"],
        f"{_EMBEDDED}our probing bars on the ImageNet-1K stand-in only (Places and iNat not evaluated)",
    ),
    _vip(
        "Figure",
        "2",
        "Diagram of the two steps (synthetic MAE, then DP-MAE), with synthetic samples",
        "partly produced",
        ["synthetic_samples"],
        "the diagram itself (no result); its synthetic samples are in synthetic_samples",
    ),
    _vip(
        "Figure",
        "3a",
        "DP-MAE training loss for several private dataset sizes at equal ε",
        "produced",
        ["vip_figure3a"],
    ),
    _vip(
        "Figure",
        "3b",
        "DP-MAE training loss from (Syn)-ViP against random initialisation",
        "produced",
        ["vip_figure3b"],
        "with a short against a long (Syn)-ViP pre-training, scaled: 2 against 8 epochs (paper: 20 and 900)",
    ),
    _vip(
        "Figure", "4a", "DP-MAE training loss per model size (synthetic initialisation)", "produced", ["vip_figure4a"]
    ),
    _vip("Figure", "4b", "DP-MAE training loss per batch size at equal ε and compute", "produced", ["vip_figure4b"]),
    _vip(
        "Figure",
        "5",
        "Downstream accuracy against model size, synthetic against random init",
        "produced",
        ["vip_figure5"],
    ),
    _vip("Figure", "6", "ε against DP-MAE iterations at q = 98304/n", "produced", ["vip_figure6"]),
    _vip("Figure", "7", "DP-MAE training loss per model size from random initialisation", "produced", ["vip_figure7"]),
)

MEHTA_ITEMS = (
    _mehta(
        "Table",
        "1",
        "ImageNet top-1 with DP-SGD and momentum per batch size, with and without DP",
        "partly produced",
        ["mehta_table1"],
        f"last-layer rows only; {_FULL_FINETUNING}",
    ),
    _mehta(
        "Table",
        "2",
        "ImageNet top-1 with DP-LAMB per batch size, with and without DP",
        "partly produced",
        ["mehta_table2"],
        f"last-layer rows only; {_FULL_FINETUNING}",
    ),
    _mehta(
        "Table",
        "3",
        "Larger models and JFT-4B pre-training, DP-LAMB at batch 2^20",
        "partly produced",
        ["mehta_table3"],
        "the JFT networks are not public: rows of our own backbones (last layer) instead; " + _FULL_FINETUNING,
    ),
    _mehta(
        "Table",
        "4",
        "One hyper-parameter changed at a time from the best last-layer setup",
        "produced",
        ["mehta_table4"],
    ),
    _mehta("Table", "5", "One full-batch DP step of a ViT-B/16 head per ε and dataset", "produced", ["mehta_table5"]),
    _mehta(
        "Table",
        "6",
        "Pre-training settings and compute of the JFT models",
        "partly produced",
        ["mehta_table6"],
        "the paper's values beside our configuration's; rows of models with no stand-in here keep the paper's only",
    ),
    _mehta(
        "Table",
        "7",
        "Learning-rate grid of momentum SGD fine-tuning",
        "partly produced",
        ["mehta_table7"],
        "the paper's values beside our configuration's; rows of models with no stand-in here keep the paper's only",
    ),
    _mehta(
        "Table",
        "8",
        "Learning-rate grids of LAMB fine-tuning",
        "partly produced",
        ["mehta_table8"],
        "the paper's values beside our configuration's; rows of models with no stand-in here keep the paper's only",
    ),
    _mehta(
        "Table",
        "9",
        "Pre-training settings of the ImageNet-21k ViT-B/16",
        "partly produced",
        ["mehta_table9"],
        "the paper's values beside our configuration's; rows of models with no stand-in here keep the paper's only",
    ),
    _mehta(
        "Table",
        "10",
        "DP-LAMB training throughput per core, per model",
        "partly produced",
        ["mehta_table10"],
        "our throughput is CPU threads against the paper's TPU cores: only the ratios between models compare",
    ),
    _mehta(
        "Table",
        "11",
        "Full fine-tuning of ViT-B/16 at the smaller batch sizes 2^15 and 2^16",
        "absent",
        (),
        "full fine-tuning only: not a stage here (heads on cached features only)",
    ),
    _mehta(
        "Figure",
        "1a",
        "Private against non-private accuracy as model and pre-training data grow",
        "partly produced",
        ["mehta_table3"],
        "no bar chart: its numbers are Table 3's, in mehta_table3 (our backbones, last layer)",
    ),
    _mehta(
        "Figure",
        "1b",
        "Accuracy against ε of one full-batch last-layer step, beside prior work",
        "produced",
        ["mehta_figure1b"],
    ),
    _mehta(
        "Figure",
        "2a",
        "LAMB against momentum SGD without privacy, per learning rate",
        "produced",
        ["mehta_figure2"],
        "ours over the configured epochs: one step from zero weights does not depend on the learning rate",
    ),
    _mehta("Figure", "2b", "Accuracy per input resolution, one private full-batch step", "produced", ["mehta_figure2"]),
    _mehta(
        "Figure", "2c", "Accuracy per initialisation scale of the last layer, with DP", "produced", ["mehta_figure2"]
    ),
    _mehta(
        "Figure",
        "3",
        "Accuracy against ε at δ = 8e-7, one full-batch step",
        "produced",
        ["mehta_figure1b"],
        "no figure of its own: the δ = 8e-7 line of mehta_figure1b",
    ),
    _mehta(
        "Figure",
        "4",
        "Accuracy against ε scored with ImageNet-ReaL labels",
        "absent",
        (),
        "ImageNet-ReaL labels: no such data at any scale here",
    ),
)

RANDP_ITEMS = (
    _randp(
        "Table",
        "1",
        "CIFAR-10 accuracy of DP-RandP per ε beside earlier DP training",
        "partly produced",
        ["dprandp_table1"],
        _epsilons("2, 3, 4, 6 and ∞"),
    ),
    _randp(
        "Table",
        "2",
        "CIFAR-100 accuracy of DP-RandP and a DP-SGD baseline per ε",
        "partly produced",
        ["dprandp_table2"],
        _epsilons("3, 4, 6 and ∞"),
    ),
    _randp(
        "Table",
        "3",
        "DermaMNIST validation accuracy per ε",
        "partly produced",
        ["dprandp_table3"],
        _epsilons("4, 7.42 and ∞"),
    ),
    _randp("Table", "4", "CIFAR-10 private linear probing on Phase I features, per ε", "produced", ["dprandp_table4"]),
    _randp(
        "Table", "5", "ImageNet private linear probing of a synthetic-pretrained ViT", "produced", ["dprandp_table5"]
    ),
    _randp(
        "Table",
        "6",
        "CIFAR-10, warm start without Phase II (all of ε in Phase III)",
        "partly produced",
        ["dprandp_table6"],
        _epsilons("2, 3, 4, 6 and ∞"),
    ),
    _randp(
        "Table",
        "7",
        "DP-RandP beside methods that use public data (CIFAR-10)",
        "partly produced",
        ["dprandp_table1", "mehta_table5"],
        "no table of its own: the DP-RandP row is Table 1's, the Mehta et al. [50] row is Mehta Table 5's "
        "CIFAR-10 row; the other rows are other works' published numbers",
    ),
    _randp(
        "Table",
        "8",
        "One-off compute per dataset: Phase I and feature extraction",
        "produced",
        ["dprandp_table8"],
    ),
    _randp(
        "Table",
        "9",
        "Compute per run: linear probing, Phase II and Phase III",
        "produced",
        ["dprandp_table9"],
    ),
    _randp(
        "Table",
        "10",
        "Private linear probing on features learnt from other synthetic image sets",
        "partly produced",
        ["dprandp_table10"],
        "StyleGAN-Oriented and dead leaves only (plus our shaders): no generator here for the other "
        "sets; our Phase I WRN in place of Baradad et al.'s AlexNet checkpoints",
    ),
    _randp(
        "Table",
        "11",
        "Phase I method: alignment and uniformity against MoCo",
        "partly produced",
        ["dprandp_table11"],
        _epsilons("2, 3, 4, 6, 8 and ∞", ours="1"),
    ),
    _randp(
        "Table",
        "12",
        "Model size: WRN-16-4 against WRN-40-4 on CIFAR-10",
        "partly produced",
        ["dprandp_table12"],
        _epsilons("2, 3, 4, 6 and 8", ours="1"),
    ),
    _randp(
        "Table",
        "13",
        "CIFAR-10 settings per ε: steps, σ, Phase II steps, learning rates",
        "partly produced",
        ["dprandp_table1"],
        _SETTINGS.format("dprandp_table1 (and the other CIFAR-10 tables)"),
    ),
    _randp(
        "Table",
        "14",
        "CIFAR-100 settings per ε: steps, σ, Phase II steps, learning rates",
        "partly produced",
        ["dprandp_table2"],
        _SETTINGS.format("dprandp_table2"),
    ),
    _randp(
        "Table",
        "15",
        "DermaMNIST settings per ε: steps, σ, Phase II steps, learning rates",
        "partly produced",
        ["dprandp_table3", "dprandp_table16"],
        _SETTINGS.format("dprandp_table3 and dprandp_table16"),
    ),
    _randp(
        "Table",
        "16",
        "DermaMNIST test accuracy per ε",
        "partly produced",
        ["dprandp_table16"],
        _epsilons("4, 7.42 and ∞"),
    ),
    *(
        _randp(
            "Table",
            str(number),
            f"CIFAR-10 accuracy per Phase II length at ε = {epsilon}",
            "absent",
            (),
            _SWEEP.format(epsilon),
        )
        for number, epsilon in ((17, 2), (18, 3), (19, 4), (20, 6), (21, 8))
    ),
    _randp(
        "Table",
        "22",
        "CIFAR-10 private linear probing settings: σ and learning rate per ε",
        "produced",
        ["dprandp_table22"],
    ),
    _randp(
        "Table",
        "23",
        "ImageNet private linear probing settings: steps, two σ, learning rate",
        "produced",
        ["dprandp_table23"],
    ),
    _randp(
        "Table",
        "24",
        "Which phases matter: full, without Phase II, Phase III only",
        "partly produced",
        ["dprandp_table24"],
        _epsilons("2, 3, 4 and 6"),
    ),
    _randp(
        "Table",
        "25",
        "Phase II length sweep from random initialisation at ε = 1",
        "partly produced",
        ["dprandp_table25"],
        f"{_EMBEDDED}our sweep is 0, 4 and 24 Phase II steps (0, 0.4, 2.4 epochs of our data), in columns of "
        "their own; the paper's 1-73 epochs: its values alone",
    ),
    _randp("Figure", "1", "Diagram of the three phases", "absent", (), "a diagram of the pipeline, no result"),
    _randp(
        "Figure",
        "2",
        "CIFAR-10 accuracy against ε beside earlier work",
        "partly produced",
        ["dprandp_figure2"],
        _epsilons("2, 3, 4, 6 and ∞"),
    ),
    _randp("Figure", "3a", "Sample images of an untrained StyleGAN (Oriented)", "produced", ["synthetic_samples"]),
    _randp(
        "Figure",
        "3b",
        "Sample images of Shaders programs",
        "produced",
        ["synthetic_samples"],
        "our shader-like programs stand in for Shaders21k (its sources are no longer available)",
    ),
    _randp(
        "Figure",
        "4",
        "Warm against cold start: accuracy against σ",
        "partly produced",
        ["dprandp_figure4"],
        f"{_EMBEDDED}ours at two σ (those of ε = 1 and 8); the paper's other σ: its values alone",
    ),
    _randp(
        "Figure",
        "5",
        "Training curves of warm and cold start at σ = 0 and σ = 9.3",
        "partly produced",
        ["dprandp_figure5"],
        "ours only (the paper prints no numbers for its curves); loss per step, test accuracy at the end; "
        "our largest epsilon stands in for sigma = 0",
    ),
    _randp("Figure", "6", "Accuracy against the share of ε spent in Phase II, ε = 1", "produced", ["dprandp_figure6"]),
    _randp(
        "Figure",
        "7",
        "Share of ε spent in Phase II against the total ε",
        "partly produced",
        ["dprandp_figure7"],
        _epsilons("2, 3, 4 and 6"),
    ),
)

ITEMS: tuple[Item, ...] = (*VIP_ITEMS, *MEHTA_ITEMS, *RANDP_ITEMS)
