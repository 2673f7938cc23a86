"""Training metrics as JSON lines, one record per logged step.

A resumed run first drops records beyond the step it resumes from (they were logged after
the checkpoint it restarts at and will be logged again), so the log never holds a step twice.
"""

from __future__ import annotations

import json
from pathlib import Path

from dpvip.files import atomic_target


def read_metrics(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class MetricsLog:
    def __init__(self, path: str | Path, resume_step: int = 0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept = [record for record in read_metrics(self.path) if record.get("step", 0) <= resume_step]
        with atomic_target(self.path) as partial:
            partial.write_text("".join(json.dumps(record) + "\n" for record in kept))

    def write(self, record: dict) -> None:
        with self.path.open("a") as handle:
            handle.write(json.dumps(record) + "\n")
