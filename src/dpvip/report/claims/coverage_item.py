"""One coverage entry (`Item`): a numbered table or figure of ViP, Mehta et al. or DP-RandP,
mapped to our output stems or to the reason it has none, with the reasons several entries
share. The entries themselves are per paper (`dpvip.report.vip.coverage`, `mehta.coverage`,
`dprandp.coverage`), gathered by `dpvip.report.bundle.coverage`.
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


def vip_item(kind: str, number: str, caption: str, status: str, outputs=(), reason: str = "") -> Item:
    return Item("ViP", kind, number, caption, status, tuple(outputs), reason)


def mehta_item(kind: str, number: str, caption: str, status: str, outputs=(), reason: str = "") -> Item:
    return Item("Mehta et al.", kind, number, caption, status, tuple(outputs), reason)


def randp_item(kind: str, number: str, caption: str, status: str, outputs=(), reason: str = "") -> Item:
    return Item("DP-RandP", kind, number, caption, status, tuple(outputs), reason)


# The noise-free MAE of ViP's Tables 6-8 is the paper's own run (App. B.4: DP-AdamW from
# (Syn)-ViP with sigma 0, q = 4096/n, T = 60,000), not the released MAE of Table 4.
NO_NOISE_MAE = "the noise-free MAE run from (Syn)-ViP (App. B.4: σ 0, q 4096/n, T 60k) is not a run here"
FULL_FINETUNING = "full fine-tuning rows: not a stage here (heads on cached features only)"
SWEEP = (
    "Phase II-length sweep at ε = {}: ours sweeps at one ε (Figure 6's, ε = 1); "
    "the paper's values are drawn as dashed lines in dprandp_figure6"
)
# What the embedded config (config/config.yaml) leaves to the paper's values alone; "produced"
# means every printed column and every row of the paper's own runs has ours beside it.
EMBEDDED = "embedded config: "
UNPROBED = "Places-365, Places-205 and iNat-2021 columns not evaluated (config/paper.yaml evaluates them)"
SHOTS = "few-shot columns other than CIFAR-100 10-shot not evaluated (config/paper.yaml evaluates all nine)"


def epsilons_reason(missing: str, ours: str = "1 and 8") -> str:
    """The reason of a DP-RandP item whose ε columns (or points) are ours only at the embedded schedule's."""
    return f"{EMBEDDED}ours at ε = {ours} only; ε = {missing}: the paper's values alone"


SETTINGS = (
    "in the notes of {}: our total steps, Phase II steps and σ per ε beside the paper's; "
    "the learning rates are config values (config/paper.yaml), not printed"
)
