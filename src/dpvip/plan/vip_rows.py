"""Which of our models fills which row of each ViP result table (torch-free: the workflow
derives its evaluation jobs from these rows, and the tables read them back).

A row's cells map a column to (backbone, metric): a backbone is `syn_vip_<model>`, a DP
run's name (`vip_...`) or a CNN baseline (`cnn_<arch>`); a metric is a column that an
evaluation or a run fact provides ("ImageNet-1K", "CIFAR-100 10-shot", "COCO AP box",
"Noise sigma", ...). Most rows use the paper's columns as metrics; Table 8 puts runs in
columns (epsilon = 2.0, 4.0, 8.0), all read from the ImageNet-1K probe.

Rows the workflow cannot reproduce (DP-NFNet, TAN, the released non-private MAE, ...)
are not listed here: the tables keep the paper's value for them and say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dpvip.plan.vip_runs import DPRun

VIP_TABLES = (
    "vip_table1",
    "vip_table2",
    "vip_table4",
    "vip_table5",
    "vip_table6",
    "vip_table7",
    "vip_table8",
    "vip_table9",
    "vip_table10",
    "vip_table11",
)
PROBE_COLUMN = "ImageNet-1K"  # Tables 8 and 11 and Figure 5 report the ImageNet-1K probe
SIZE_LETTERS = {"small": "S", "base": "B", "large": "L"}  # Table 9's row names


@dataclass(frozen=True)
class Backbones:
    """What the workflow trains: (Syn)-ViP models, DP runs, the ablation model, CNN baselines
    ({paper row: arch})."""

    syn_vip: list[str]
    runs: dict[str, DPRun]
    anchor: str
    baselines: dict[str, str] = field(default_factory=dict)

    @property
    def main_syn(self) -> str:
        return f"syn_vip_{self.anchor}"

    @property
    def main_vip(self) -> str:
        return f"vip_{self.anchor}"

    def of(self, ablation: str) -> list[DPRun]:
        return [run for run in self.runs.values() if run.ablation == ablation]


@dataclass(frozen=True)
class Row:
    label: str  # the paper's row name where this row reproduces one
    cells: dict[str, tuple[str, str]]  # column -> (backbone, metric)
    backbone: str | None = None  # the row's model, if one model fills it


def _plain(label: str, backbone: str, columns: list[str]) -> Row:
    return Row(label, {column: (backbone, column) for column in columns}, backbone)


def _count(n: int | None) -> str:
    if n is None:
        return "all"
    return f"{n / 1e6:g}M" if n >= 1_000_000 else str(n)


def _size_label(prefix: str, model: str) -> str:
    return f"{prefix}-{SIZE_LETTERS.get(model, model)}"


def table_rows(table: str, columns: list[str], ours: Backbones, examples: dict[str, int] | None = None) -> list[Row]:
    """Our rows of `table` over the paper's `columns`; `examples` ({run: n}, known once the
    runs have indexed their data) names Table 10's dataset-size rows."""
    examples = examples or {}
    syn, vip = ours.main_syn, ours.main_vip
    pair = [("(Syn)-ViP", syn), ("ViP", vip)]
    if table == "vip_table1":
        pairs = [("(Syn)-ViP", syn), ("ViP-LAION", vip)]
    elif table == "vip_table2":
        pairs = [*pair, *((row, f"cnn_{arch}") for row, arch in ours.baselines.items())]
    elif table in ("vip_table4", "vip_table5", "vip_table7"):
        pairs = pair
    elif table == "vip_table6":
        pairs = [("(Syn)-ViP", syn), ("ViP / LAION-233M", vip)]
    elif table == "vip_table8":
        by_epsilon = {run.point: run.name for run in ours.of("epsilon")} | {
            ours.runs[vip].values.get("epsilon", 8.0): vip
        }
        cells = {f"epsilon = {epsilon:.1f}": (name, PROBE_COLUMN) for epsilon, name in sorted(by_epsilon.items())}
        return [Row("ViP-LAION", cells)]
    elif table == "vip_table9":
        pairs = [(_size_label("(Syn)-ViP", m), f"syn_vip_{m}") for m in ours.syn_vip]
        pairs += [
            (_size_label("ViP", run.model), run.name)
            for run in ours.runs.values()
            if run.ablation in ("main", "model_size")
        ]
    elif table == "vip_table10":
        data = [*ours.of("dataset_size"), ours.runs[vip]]
        pairs = [("(Syn)-ViP", syn)]
        pairs += [
            (f"ViP / data {_count(examples.get(run.name, run.values.get('examples')))}", run.name) for run in data
        ]
        batches = sorted([*ours.of("batch_size"), ours.runs[vip]], key=lambda run: run.values.get("batch_size", 0))
        pairs += [(f"ViP / batch {run.values.get('batch_size')}", run.name) for run in batches]
    elif table == "vip_table11":
        pairs = [("ViP (default)", vip)]
        pairs += [(f"ViP / decoder depth {run.point}", run.name) for run in ours.of("decoder_depth")]
        pairs += [(f"ViP / masking ratio {run.point:g}", run.name) for run in ours.of("mask_ratio")]
    else:
        raise KeyError(f"no rows for table {table}")
    return [_plain(label, backbone, columns) for label, backbone in pairs]


def figure5_backbones(ours: Backbones) -> dict[str, list[str]]:
    """ViP Figure 5's lines: {initialisation: runs by model size}."""
    synthetic = [run.name for run in ours.runs.values() if run.ablation in ("main", "model_size")]
    random = [run.name for run in ours.of("random_init")]
    return {"(Syn)-ViP init": synthetic, "random init": random}
