"""Notes that keep a Mehta et al. table honest about its stand-ins: the chance level of each
dataset a study read and the cells at or near it (`dpvip.report.claims.chance`), and rows that are one
stand-in run again (the embedded default puts digits under CIFAR-10, CIFAR-100 and
ImageNet-1k alike, so Table 5's three rows are one experiment three times)."""

from __future__ import annotations

from collections import defaultdict

from dpvip.report.claims.chance import STAND_IN_OF_SOURCE, Chance, chance_note, flag_notes, recorded_chance
from dpvip.report.common.transfer_cells import Cell, feature_parts


def study_chances(results: dict, section: dict, paper_datasets: dict[str, str]) -> dict[str, Chance]:
    """{our dataset: its chance level} of every dataset the study's caches hold: the classes and
    test examples the caches record; `paper_datasets` (paper name -> ours) says what each stands in for."""
    chances = {}
    for path, cache in sorted(results["features"].items()):
        dataset = feature_parts(path)["dataset"]
        source = (section["datasets"].get(dataset) or {}).get("source", dataset)
        stand_in = STAND_IN_OF_SOURCE.get(source)
        tasks = [paper for paper, ours in paper_datasets.items() if ours == dataset]
        data = f"{stand_in} (standing in for {', '.join(tasks)})" if stand_in and tasks else stand_in or dataset
        found = recorded_chance(tasks[0] if tasks else dataset, cache, stand_in, data)
        if found:
            chances[dataset] = found
    return chances


def chance_notes(
    cells: dict[tuple[str, str], Cell], results: dict, section: dict, paper_datasets: dict[str, str]
) -> list[str]:
    """Each dataset's chance level, and our cells at or near it (their values mean nothing)."""
    chances = study_chances(results, section, paper_datasets)
    by_dataset = defaultdict(dict)
    for (row, column), cell in cells.items():
        by_dataset[feature_parts(cell.runs[0]["features"])["dataset"]][f"{row} / {column}"] = cell.mean
    notes = []
    for dataset, chance in chances.items():
        notes += [chance_note(chance), *flag_notes(by_dataset[dataset], chance)]
    return notes


def shared_stand_in_notes(mapping: dict[str, str], what: str) -> list[str]:
    """One note per stand-in that fills more than one of `mapping`'s rows (paper name -> ours):
    those rows are the same experiment run again."""
    rows = defaultdict(list)
    for paper, ours in mapping.items():
        rows[ours].append(paper)
    return [
        f"Rows {', '.join(papers)} all use the stand-in {what} {ours}: they are one experiment run "
        f"{len(papers)} times, not {len(papers)} {what}s; they differ only by each run's own randomness "
        "(noise, batches), which their spread measures."
        for ours, papers in rows.items()
        if len(papers) > 1
    ]
