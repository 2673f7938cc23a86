"""Class-balanced K-shot subsets: exactly K distinct examples of every class, fixed by the seed."""

import numpy as np
import pytest

from dpvip.errors import DpvipInputError
from dpvip.evaluate.kshot import k_shot_indices

# Five classes of unequal size with non-contiguous label values, in shuffled order.
SIZES = {3: 10, 7: 12, 11: 8, 20: 15, 42: 9}


def labels(sizes=SIZES, seed=5):
    values = np.repeat(list(sizes), list(sizes.values()))
    return np.random.default_rng(seed).permutation(values)


@pytest.mark.parametrize("shots", [1, 4, 8])
def test_exactly_k_distinct_valid_examples_of_every_class(shots):
    y = labels()
    chosen = k_shot_indices(y, shots, seed=0)
    assert len(chosen) == shots * len(SIZES)
    assert len(np.unique(chosen)) == len(chosen)  # no duplicates
    assert np.all((chosen >= 0) & (chosen < len(y)))
    assert np.all(np.diff(chosen) > 0)  # sorted, as documented
    classes, counts = np.unique(y[chosen], return_counts=True)
    assert classes.tolist() == sorted(SIZES)
    assert counts.tolist() == [shots] * len(SIZES)


def test_shots_equal_to_a_class_size_take_all_of_that_class():
    y = labels()
    chosen = k_shot_indices(y, 8, seed=1)  # class 11 has exactly 8 examples
    assert set(np.flatnonzero(y == 11)) <= set(chosen.tolist())


def test_the_same_seed_gives_the_same_indices():
    y = labels()
    assert np.array_equal(k_shot_indices(y, 4, seed=3), k_shot_indices(y, 4, seed=3))


def test_another_seed_gives_other_indices():
    y = labels()
    # 4 of 8..15 per class: two seeds drawing the same 20 indices is vanishingly unlikely.
    assert not np.array_equal(k_shot_indices(y, 4, seed=3), k_shot_indices(y, 4, seed=4))


def test_a_class_with_fewer_than_k_examples_is_named():
    y = labels({0: 10, 1: 10, 9: 2})
    with pytest.raises(DpvipInputError, match=r"class 9 has 2 examples, fewer than 3 shots"):
        k_shot_indices(y, 3, seed=0)


@pytest.mark.parametrize("shots", [0, -1])
def test_shots_below_one_are_refused(shots):
    with pytest.raises(DpvipInputError, match=f"shots {shots} must be a positive integer"):
        k_shot_indices(labels(), shots, seed=0)
