"""DP-RandP's private linear probing: Tables 4 (CIFAR-10) and 5 (ImageNet), accuracy per
epsilon beside the paper's, and Tables 22 and 23, the paper's hyperparameters beside ours.
One row per epsilon (the paper prints epsilons as columns)."""

from __future__ import annotations

import math

import pandas as pd

from dpvip.privacy import gaussian
from dpvip.report.claims.chance import STAND_IN_OF_SOURCE, Chance, chance_note, flag_notes, recorded_chance
from dpvip.report.common.paper_values import paper_table
from dpvip.report.common.transfer_cells import Cell, feature_note, study_cells

NAN = math.nan
TITLES = {
    "table4": "DP-RandP Table 4: private linear probing on CIFAR-10 (full batch, 100 steps)",
    "table5": "DP-RandP Table 5: private linear probing on ImageNet (all blocks pooled, norm 50, private mean)",
    "table22": "DP-RandP Table 22: hyperparameters of the CIFAR-10 private linear probing",
    "table23": "DP-RandP Table 23: hyperparameters of the ImageNet private linear probing",
}
TASK = {"table4": "cifar", "table22": "cifar", "table5": "imagenet", "table23": "imagenet"}
PAPER_TASK = {"table4": "CIFAR-10", "table5": "ImageNet-1k"}  # the accuracy tables' data


def _epsilon(column: str) -> float | None:
    """'epsilon=0.5' -> 0.5; 'Non-private' -> None."""
    return float(column.removeprefix("epsilon=")) if column.startswith("epsilon=") else None


def _ours(cells: dict) -> dict[float | None, Cell]:
    return {_epsilon(column): cell for (row, column), cell in cells.items()}


def _paper_row(printed: pd.DataFrame, row: str, epsilon: float | None, suffix: str = "") -> float:
    if epsilon is None or row not in printed.index:
        return NAN
    column = f"epsilon={epsilon:g}{suffix}"
    return printed.loc[row, column] if column in printed.columns else NAN


def _accuracy_table(table: str, printed: pd.DataFrame, ours: dict) -> pd.DataFrame:
    ours_row = next(r for r in printed.index if r.startswith("Ours"))
    others = [r for r in printed.index if r != ours_row]
    epsilons = sorted({e for e in ours if e is not None}) + ([None] if None in ours else [])
    rows = []
    for epsilon in epsilons:
        cell = ours.get(epsilon)
        row = {"epsilon": "inf (without privacy)" if epsilon is None else epsilon}
        row |= {f"{other} (paper)": _paper_row(printed, other, epsilon) for other in others}
        row |= {
            "accuracy (paper)": _paper_row(printed, ours_row, epsilon),
            "std (paper)": _paper_row(printed, ours_row, epsilon, " std"),
        }
        row |= {"accuracy (ours)": cell.mean if cell else NAN, "std (ours)": cell.std if cell else NAN}
        rows.append(row)
    return pd.DataFrame(rows)


def _sigma_table(printed: pd.DataFrame, ours: dict) -> pd.DataFrame:
    """Table 22: sigma and the learning rate per epsilon (T 100, full batch)."""
    rows = []
    for epsilon in sorted(e for e in ours if e is not None):
        privacy = ours[epsilon].privacy
        rows.append(
            {
                "epsilon": epsilon,
                "sigma (paper)": _paper_row(printed, "σ", epsilon),
                "sigma (ours)": privacy["sigma_sgd"],
                "LR (paper)": _paper_row(printed, "LR", epsilon),
                "LR (ours)": ours[epsilon].lr,
                "steps (ours)": privacy["steps"],
            }
        )
    return pd.DataFrame(rows)


def _composition_table(printed: pd.DataFrame, ours: dict, delta: float) -> pd.DataFrame:
    """Table 23: T, sigma_1 (private mean), sigma_2 (DP-SGD), lr; and the epsilon that the
    paper's own sigmas give under exact Gaussian-DP composition."""
    rows = []
    for epsilon in sorted(e for e in ours if e is not None):
        label = f"epsilon={epsilon:g}"
        paper = printed.loc[label] if label in printed.index else None
        privacy = ours[epsilon].privacy
        row = {"epsilon": epsilon}
        for name, key in (("Steps T", "steps"), ("σ_1", "sigma_mean"), ("σ_2", "sigma_sgd"), ("learning rate", None)):
            row[f"{name} (paper)"] = paper[name] if paper is not None and name in paper.index else NAN
            row[f"{name} (ours)"] = ours[epsilon].lr if key is None else privacy[key]
        if paper is not None:
            mu = gaussian.composed_mu([(paper["σ_1"], 1), (paper["σ_2"], int(paper["Steps T"]))])
            row["epsilon of the paper's sigmas"] = gaussian.epsilon_for_delta(mu, delta)
        row["epsilon (ours)"] = privacy["epsilon"]
        rows.append(row)
    return pd.DataFrame(rows)


def probe_chance(table: str, results: dict, dataset: str, section: dict) -> Chance | None:
    """The chance level of an accuracy table's data: the classes its feature caches record,
    else those of the configured stand-in (None: unknown)."""
    task = PAPER_TASK[table]
    caches = list(results.get("features", {}).values())
    stand_in = STAND_IN_OF_SOURCE.get((section["datasets"].get(dataset) or {}).get("source", dataset))
    what = f"{stand_in} (standing in for {task})" if stand_in else task
    return recorded_chance(task, caches[0] if caches else None, stand_in, what)


def probe_table(
    table: str, results: dict, values: pd.DataFrame, section: dict, scale: str
) -> tuple[pd.DataFrame, str, list[str]]:
    """(frame, title, notes) of DP-RandP's Table 4, 5, 22 or 23 from its probe study."""
    printed = paper_table(values, "dprandp", table)
    ours = _ours(study_cells(results))
    probe = section["dprandp_probe"][TASK[table]]
    if table in ("table4", "table5"):
        frame = _accuracy_table(table, printed, ours)
    elif table == "table22":
        frame = _sigma_table(printed, ours)
    else:
        frame = _composition_table(printed, ours, probe["delta"])
    backbone = section["backbones"][probe["backbone"]]
    seeds = sorted({cell.seeds for cell in ours.values()})
    notes = [
        f"Scale: {scale}. Backbone {probe['backbone']} "
        f"({backbone['from']} {backbone.get('run', backbone.get('path', ''))}), "
        f"features '{probe['recipe']}', dataset {probe['dataset']}, delta {probe['delta']:g}.",
        "Full batch every step, zero-initialised linear layer without bias, softmax cross-entropy, SGD with momentum "
        f"{probe['momentum']:g}, clip {probe['clip_norm']:g} (not given by the paper); "
        "sigma calibrated exactly by Gaussian-DP composition, not rounded.",
        f"Accuracy: mean and std (ddof 1) over {'/'.join(map(str, seeds))} seeds, in percent.",
        feature_note(results),
    ]
    chance = probe_chance(table, results, probe["dataset"], section) if table in PAPER_TASK else None
    if chance:
        notes.append(chance_note(chance))
        notes += flag_notes(dict(zip("ε = " + frame["epsilon"].astype(str), frame["accuracy (ours)"])), chance)
    if probe.get("feature_norm"):
        notes.append(
            f"Each feature vector is scaled to norm {probe['feature_norm']:g}, then centred on a private mean "
            "(Gaussian mechanism, sigma_1, sensitivity C/n) composed with the T steps."
        )
    if table in ("table4", "table22"):
        notes.append(
            "Epsilon 0.03 is in Table 4 but not in Table 22: it takes epsilon 0.1's learning rate. "
            "The paper's CIFAR-10 feature is the 4,096-d third-to-last layer (projection head's first block); "
            "ours is that layer of our Phase I network."
        )
    if table == "table5":
        notes.append(
            "The paper's ImageNet backbone is Yu et al.'s ViT-B on Shaders-21k (MAE): our (Syn)-ViP is that recipe."
        )
    return frame, TITLES[table], notes
