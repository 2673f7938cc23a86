"""Per-example correctness of an evaluated run, kept beside its accuracy: arms scored on the same
test images can then be compared paired (dpvip.report.claims.contrasts), where the difficulty of each
image cancels in their difference.

A record is {"correct": base64 of the packed bits, one per test example in the set's order,
"examples": n, "test_set": the set's identity}. The identity is the data set's name and a
digest of its labels in order: two runs that read the same images in the same order share it,
whatever the backbone's resolution or features (a different order or set does not).
"""

from __future__ import annotations

import base64
import hashlib

import numpy as np

PER_EXAMPLE = "per_example"  # the result key that holds the records


def identity_of_test_set(name: str, labels) -> str:
    """`name`: the data set; `labels`: its test labels in the order the run scored them."""
    ordered = np.ascontiguousarray(np.asarray(labels, dtype=np.int64))
    return f"{name}:{hashlib.sha256(ordered.tobytes()).hexdigest()[:16]}"


def correctness_record(correct, name: str, labels) -> dict:
    """The record of one run's correctness (a bool per test example) on the set (`name`, `labels`)."""
    bits = np.asarray(correct, dtype=bool).ravel()
    if len(bits) != len(labels):
        raise ValueError(f"{len(bits)} correctness values for {len(labels)} test examples")
    return {
        "correct": base64.b64encode(np.packbits(bits).tobytes()).decode("ascii"),
        "examples": int(len(bits)),
        "test_set": identity_of_test_set(name, labels),
    }


def read_correctness(record: dict | None) -> tuple[np.ndarray, str] | None:
    """(0/1 per example, the set's identity) of a record; None for a run that kept none."""
    if not record:
        return None
    packed = np.frombuffer(base64.b64decode(record["correct"]), dtype=np.uint8)
    bits = np.unpackbits(packed)[: int(record["examples"])]
    return bits.astype(np.float64), str(record["test_set"])
