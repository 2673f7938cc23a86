"""Per-example correctness records (dpvip.per_example): they round-trip bit for bit, name the
test set by its name and label order, and refuse a length that is not the set's; groups read
from them are paired only when every run shares one set (dpvip.report.claims.contrasts.paired_runs)."""

from __future__ import annotations

import numpy as np
import pytest

from dpvip.per_example import correctness_record, read_correctness, identity_of_test_set
from dpvip.report.claims.contrasts import paired_runs


def test_a_record_round_trips():
    rng = np.random.default_rng(0)
    correct, labels = rng.random(361) < 0.4, rng.integers(0, 10, 361)
    record = correctness_record(correct, "digits", labels)
    bits, test_set = read_correctness(record)
    assert np.array_equal(bits, correct.astype(float)) and record["examples"] == 361
    assert test_set == identity_of_test_set("digits", labels)
    assert len(record["correct"]) <= 64  # 361 bits: 46 bytes, base64


def test_the_identity_follows_the_name_and_the_label_order():
    labels = np.array([0, 1, 2, 1])
    assert identity_of_test_set("digits", labels) == identity_of_test_set("digits", list(labels))
    assert identity_of_test_set("digits", labels) != identity_of_test_set("digits", labels[::-1])
    assert identity_of_test_set("digits", labels) != identity_of_test_set("photos", labels)


def test_a_record_of_another_length_is_refused():
    with pytest.raises(ValueError, match="3 correctness values for 4 test examples"):
        correctness_record([True, False, True], "digits", [0, 1, 2, 3])


def test_runs_pair_only_on_one_shared_set():
    labels = np.arange(8) % 3
    one = correctness_record(np.ones(8, bool), "digits", labels)
    other = correctness_record(np.ones(8, bool), "digits", labels[::-1])
    paired = paired_runs([one, one])
    assert paired["test_set"] == one["test_set"] and len(paired["correct"]) == 2
    assert paired_runs([one, other]) == {} and paired_runs([one, None]) == {} and paired_runs([]) == {}
