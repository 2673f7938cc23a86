"""Where a DP run's randomness comes from: its noise and its Poisson batches.

A mechanism is private only if nobody can regenerate its noise or its batches. Two modes:

- `secret` (the default): 32 bytes from the OS CSPRNG (`secrets.token_bytes`), made at the
  run's first start in its private work folder (`dp_secret.key`, created exclusively with
  mode 0600). A resume reads it back, so a killed run resumes bit-identically. The key is
  never written anywhere else: not into checkpoints, metrics, results, logs, provenance,
  the report or the bundle. Two runs of one config make two keys: independent noise and
  batches.
- `seeded`: the key is derived from the run's published seed, so reruns are bit-identical
  (tests, reproductions) and anybody holding the config can regenerate the noise and
  subtract it. Such a run is NOT PRIVATE, and every record of it says so.

Every draw is seeded by HMAC-SHA256(key, purpose | numbers), e.g. (noise, step) or
(inclusion, step, block): a keyed derivation, so the published step numbers, seeds and
outputs narrow nothing down about the seeds of other steps. numpy generators (Poisson
inclusions) take the whole 256-bit digest; torch generators (the Gaussian noise, on the
run's device) take 63 bits of it, fresh for every step.

The Gaussian noise is drawn as opacus' `secure_mode` draws it (after Holohan and Braghin,
"Secure Random Sampling in Differential Privacy", 2021): the sum of four N(0, s^2) draws
divided by 2, which has the same N(0, s^2) law but no longer carries the floating-point
artefacts of one Box-Muller draw that Mironov's and Jin et al.'s attacks read back from a
released value. It costs four draws per coordinate per step, once per step (not per
example).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import secrets
import struct
from pathlib import Path

from dpvip.errors import DpvipInputError
from dpvip.privacy import check_randomness

KEY_FILE = "dp_secret.key"
KEY_BYTES = 32  # 256 bits (the issue asks at least 128)
NOT_PRIVATE = "NOT PRIVATE: seeded randomness, the noise is reproducible from the published seed"


class RunRandomness:
    """A run's key and mode; `seed(purpose, *numbers)` and `entropy(...)` derive draws."""

    def __init__(self, mode: str, key: bytes):
        check_randomness(mode)
        if len(key) < 16:
            raise DpvipInputError("a DP run's key must hold at least 128 bits")
        self.mode, self._key = mode, key

    def __repr__(self) -> str:  # never the key
        return f"RunRandomness({self.mode!r})"

    @classmethod
    def seeded(cls, seed: int) -> RunRandomness:
        """NOT PRIVATE: a key anybody can derive from the published seed."""
        return cls("seeded", hashlib.sha256(b"dpvip seeded run " + str(int(seed)).encode()).digest())

    @classmethod
    def secret(cls, work_dir: str | Path) -> RunRandomness:
        """The run's secret key from `work_dir`, made there on the run's first start."""
        path = Path(work_dir) / KEY_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            # Written whole under another name, then linked into place: a reader never sees a
            # partial key, and of two first starts racing, one key wins and both use it.
            fresh = path.with_name(f"{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
            handle = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(handle, secrets.token_bytes(KEY_BYTES))
                os.fsync(handle)
            finally:
                os.close(handle)
            try:
                os.link(fresh, path)
            except FileExistsError:
                pass
            finally:
                fresh.unlink()
        key = path.read_bytes()
        if len(key) != KEY_BYTES:
            raise DpvipInputError(f"{path} holds {len(key)} bytes, not a key of {KEY_BYTES}: delete it to start over")
        return cls("secret", key)

    @classmethod
    def for_run(cls, mode: str, work_dir: str | Path | None, seed: int, fingerprint: dict) -> RunRandomness:
        """The randomness of one run: `secret`, the key in `work_dir` (made there on the first
        start); `seeded`, derived from `seed`. Then one stream per run `fingerprint` (its
        settings and data), so a run restarted with other settings never repeats the noise of
        the first, and the runs of one job (a study) draw independently."""
        check_randomness(mode)
        if mode == "seeded":
            return cls.seeded(seed).child(fingerprint)
        if work_dir is None:
            raise DpvipInputError("a DP run with secret randomness needs a private work folder for its key")
        return cls.secret(work_dir).child(fingerprint)

    @classmethod
    def for_settings(cls, settings, work_dir: str | Path | None = None) -> RunRandomness:
        """`for_run` for a run's settings dataclass: its `randomness` and `seed`, and its
        fields as the run's fingerprint."""
        return cls.for_run(settings.randomness, work_dir, settings.seed, dataclasses.asdict(settings))

    @property
    def private(self) -> bool:
        return self.mode == "secret"

    def record(self) -> dict:
        """What a ledger record says of the randomness (never the key)."""
        record = {"randomness": self.mode, "private": self.private}
        return record if self.private else record | {"note": NOT_PRIVATE}

    def child(self, fingerprint: dict) -> RunRandomness:
        """An independent key for the run `fingerprint` (JSON-able)."""
        name = json.dumps(fingerprint, sort_keys=True, default=str)
        return RunRandomness(self.mode, self._digest("run", name.encode()))

    def _digest(self, purpose: str, *parts: bytes) -> bytes:
        message = purpose.encode() + b"\0" + b"".join(struct.pack(">I", len(p)) + p for p in parts)
        return hmac.new(self._key, message, hashlib.sha256).digest()

    def entropy(self, purpose: str, *numbers: int) -> int:
        """256 bits for (purpose, numbers): a numpy SeedSequence's entropy."""
        return int.from_bytes(self._digest(purpose, *(_number(n) for n in numbers)), "big")

    def seed(self, purpose: str, *numbers: int) -> int:
        """63 bits for (purpose, numbers): a torch generator's seed."""
        return int.from_bytes(self._digest(purpose, *(_number(n) for n in numbers))[:8], "big") >> 1


def _number(value: int) -> bytes:
    value = int(value)
    if value < 0:
        raise DpvipInputError(f"a randomness derivation takes non-negative numbers, not {value}")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
