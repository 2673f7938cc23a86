"""The validation split cut from the training data: disjoint, of the configured size
(ceil(fraction * n)), covering the training split, the same for the same seed; stratified by
class, or a uniform cut that reads no label; and the notes that say how a grid point was chosen."""

from __future__ import annotations

import numpy as np
import pytest

from dpvip.errors import DpvipInputError
from dpvip.selection import TEST, TEST_LABEL, Selection, best, held_out_count, selection_note, validation_split

LABELS = np.repeat(np.arange(10), [150, 140, 130, 120, 110, 100, 90, 80, 70, 47])  # n = 1,037, unbalanced


@pytest.mark.parametrize("stratified", [True, False])
@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.5])
def test_the_split_is_disjoint_covers_train_and_has_the_configured_size(fraction, stratified):
    kept, held = validation_split(LABELS, fraction, seed=4, stratified=stratified)
    assert len(held) == int(np.ceil(fraction * len(LABELS))) == held_out_count(len(LABELS), fraction)
    assert not set(kept) & set(held)
    assert np.array_equal(np.sort(np.concatenate([kept, held])), np.arange(len(LABELS)))
    assert np.array_equal(kept, np.sort(kept)) and np.array_equal(held, np.sort(held))
    again = validation_split(LABELS, fraction, seed=4, stratified=stratified)
    assert np.array_equal(again[1], held)  # deterministic
    assert not np.array_equal(validation_split(LABELS, fraction, seed=5, stratified=stratified)[1], held)


def test_a_stratified_split_holds_out_each_class_share():
    _, held = validation_split(LABELS, 0.1, seed=0)
    counts = np.bincount(LABELS[held], minlength=10)
    expected = 104 * np.bincount(LABELS) / len(LABELS)  # ceil(103.7) = 104 held out
    assert np.all(np.abs(counts - expected) < 1)  # largest remainders: each within one of its share


def test_a_uniform_split_reads_no_label():
    """The cut of the DP heads: any labels of the same length give the same positions."""
    shuffled = np.random.default_rng(0).permutation(LABELS)
    a = validation_split(LABELS, 0.1, seed=2, stratified=False)
    b = validation_split(shuffled, 0.1, seed=2, stratified=False)
    assert np.array_equal(a[1], b[1])
    assert not np.array_equal(validation_split(LABELS, 0.1, seed=2)[1], validation_split(shuffled, 0.1, seed=2)[1])


def test_a_split_needs_one_example_on_each_side():
    with pytest.raises(DpvipInputError, match="at least one"):
        validation_split(np.zeros(3), 0.9, seed=0)
    with pytest.raises(DpvipInputError, match=r"outside \(0, 1\)"):
        validation_split(np.zeros(30), 0.0, seed=0)


def test_a_selection_from_config_checks_its_mode():
    assert Selection.of(None) == Selection("validation", 0.1, 0)
    assert Selection.of({"mode": "test"}) == TEST and not TEST.validating
    with pytest.raises(DpvipInputError, match="not one of validation, test"):
        Selection.of({"mode": "train"})


def test_best_takes_the_first_of_equal_scores():
    assert best({3: 0.5, 1: 0.7, 2: 0.7}) == 1


def test_the_notes_say_which_selection_was_used():
    assert selection_note(TEST.record(), "learning rate") == f"learning rate {TEST_LABEL}"
    assert TEST_LABEL == "picked on test accuracy (the paper's practice; optimistic)"
    assert selection_note(None).endswith(TEST_LABEL)  # an older result picked on test
    note = selection_note(Selection(fraction=0.2, seed=1, stratified=False).record(), "learning rate")
    assert note.startswith("learning rate picked on validation accuracy: 20% of the training split held out")
    assert "uniformly at random" in note and "optimistic" not in note
