"""Chance levels: the class count as recorded, else the stand-in's, else the task's; cells at
or below chance, or within one run's binomial noise of it, are named; DP-RandP's probing
tables state theirs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import merged_config

from dpvip.report.claims.chance import Chance, chance_note, classes_of, flag_notes
from dpvip.report.dprandp.probe_tables import probe_table
from dpvip.report.common.paper_values import load_paper_values

ROOT = Path(__file__).resolve().parents[3]
VALUES = load_paper_values(ROOT / "config" / "paper_values")
DIGITS = Chance(10, 360, "scikit-learn digits (standing in for CIFAR-10)")


def test_level_and_noise_band():
    assert DIGITS.level == 10.0
    assert DIGITS.noise == pytest.approx(200 * math.sqrt(0.1 * 0.9 / 360))  # 3.16 points
    assert Chance(100, None, "CIFAR-100").level == 1.0 and Chance(100, None, "CIFAR-100").noise == 0.0
    assert chance_note(Chance(7, 2005, "DermaMNIST")) == (
        "Chance level: 7 classes of DermaMNIST, so guessing scores 14.3%."
    )


def test_classes_come_from_the_record_then_the_stand_in_then_the_task():
    assert classes_of("CIFAR-100", 20, "scikit-learn digits") == 20
    assert classes_of("CIFAR-100", None, "scikit-learn digits") == 10
    assert classes_of("CIFAR-100") == 100 and classes_of("DermaMNIST") == 7
    assert classes_of("CIFAR-10", None, "an unknown stand-in") is None and classes_of("SVHN") is None


def test_flags_cells_at_or_below_chance_and_within_its_noise():
    cells = {"a": 10.0, "b": 13.1, "c": 13.2, "d": 7.5, "e": math.nan}
    at_or_below, near = flag_notes(cells, DIGITS)
    assert at_or_below == "At or below chance (10%): a (10.0); d (7.5)."
    assert near.endswith("(≤ 13.2%), so not told apart from guessing: b (13.1).")  # c is 13.2 > 13.16
    assert flag_notes({"a": 50.0}, DIGITS) == []


def probe_study() -> dict:
    """The CIFAR-10 probe at two epsilons: 8% and 60% on the 360 digits test images."""
    runs = [
        {
            "row": "Ours",
            "column": f"epsilon={epsilon:g}",
            "features": "wrn/digits/projection1_center12",
            "settings": {"lr": 1.0, "seed": seed},
            "result": {"accuracy": accuracy, "privacy": {"sigma_sgd": 10.0, "steps": 100, "epsilon": epsilon}},
        }
        for epsilon, accuracy in ((0.1, 8.0), (1.0, 60.0))
        for seed in (0, 1)
    ]
    return {"runs": runs, "features": {"wrn/digits/projection1_center12": {"classes": 10, "test": 360}}}


def test_probe_accuracy_tables_state_their_chance_level():
    section = merged_config("config.yaml")["dp_transfer"]
    _, _, notes = probe_table("table4", probe_study(), VALUES, section, "embedded")
    assert (
        "Chance level: 10 classes of photo crops (11 scikit-image photographs) (standing in for CIFAR-10), "
        "so guessing scores 10%." in notes
    )
    assert "At or below chance (10%): ε = 0.1 (8.0)." in notes
    _, _, notes = probe_table("table22", probe_study(), VALUES, section, "embedded")  # settings, no accuracy
    assert not any(note.startswith("Chance level") for note in notes)
