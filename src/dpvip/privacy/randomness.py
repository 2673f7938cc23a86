"""Where a DP run's randomness comes from: its noise and its Poisson batches.

A mechanism is private only if nobody can regenerate its noise or its batches. Two modes:

- `secret` (the default): 32 bytes from the OS CSPRNG (`secrets.token_bytes`), made at the
  run's first start in the key store, a folder outside results/ (`privacy.key_dir`, default
  `.dpvip/keys` in the working directory, mode 0700; `DPVIP_KEY_DIR` in a job's environment),
  one key file per run folder (created exclusively with mode 0600). A resume reads it back,
  so a killed run resumes bit-identically; only rank 0 makes it, the other ranks read it
  (the store must be on a filesystem they share). A key is opened without following
  symlinks and refused unless it is a regular file of this user with mode 0600. Once a run's
  results are written its key is deleted (`release_key`; `privacy.keep_keys` keeps it), and
  its resume state with it: a forced rerun trains afresh with a new key. The key is never
  written anywhere else: not into checkpoints, metrics, results, logs, provenance, the report
  or the bundle. Two runs of one config make two keys: independent noise and batches.
- `seeded`: the key is derived from the run's published seed, so reruns are bit-identical
  (tests, reproductions) and anybody holding the config can regenerate the noise and
  subtract it. Such a run is NOT PRIVATE, and every record of it says so.

Every draw is keyed by HMAC-SHA256(key, purpose | numbers), e.g. (noise, step) or
(inclusion, step, block): a keyed derivation, so the published step numbers, seeds and
outputs narrow nothing down about the keys of other steps. What each generator takes:
- the Gaussian noise (`dpvip.privacy.noise`): the whole 256-bit `material`, expanded into the
  full state of its generators (mt19937 on CPU: 19,968 bits; two Philox generators of 125
  bits each on CUDA, XORed);
- the Poisson inclusions: numpy's PCG64 from a SeedSequence of the whole 256-bit `entropy`
  (PCG64 keeps a 128-bit state and a 128-bit increment);
- per-example draws (augmentations, MAE masks; `seed`): 63 bits, of which torch's CPU
  generator keeps 32. They need no secrecy: the guarantee holds whoever knows how an
  example was cropped or masked, since clipping bounds each example's gradient whatever its
  view.

Each run's stream is keyed by its fingerprint (`child`): its settings, a digest of the
private data it reads and of its input checkpoint, so a rerun on changed data never repeats
the noise of the first.

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
import stat
import struct
from pathlib import Path

from dpvip.errors import DpvipInputError
from dpvip.privacy import check_randomness

KEY_SUFFIX = ".key"
KEY_BYTES = 32  # 256 bits
KEY_DIR_ENV, KEEP_KEYS_ENV = "DPVIP_KEY_DIR", "DPVIP_KEEP_KEYS"  # set for every job from privacy.key_dir/keep_keys
DEFAULT_KEY_DIR = ".dpvip/keys"  # relative to the working directory
NOT_PRIVATE = "NOT PRIVATE: seeded randomness, the noise is reproducible from the published seed"


class RunRandomness:
    """A run's key and mode; `seed(purpose, *numbers)` and `entropy(...)` derive draws."""

    def __init__(self, mode: str, key: bytes):
        check_randomness(mode)
        if len(key) < 16:
            raise DpvipInputError("a DP run's key must hold at least 128 bits")
        self.mode, self._key = mode, key
        self.created = False  # whether this start made the key (a saved state then is not this key's)

    def __repr__(self) -> str:  # never the key
        return f"RunRandomness({self.mode!r})"

    @classmethod
    def seeded(cls, seed: int) -> RunRandomness:
        """NOT PRIVATE: a key anybody can derive from the published seed."""
        return cls("seeded", hashlib.sha256(b"dpvip seeded run " + str(int(seed)).encode()).digest())

    @classmethod
    def fresh(cls) -> RunRandomness:
        """A secret key held in memory only, for a run that never resumes (an audit's):
        nothing is written to the key store."""
        return cls("secret", secrets.token_bytes(KEY_BYTES))

    @classmethod
    def secret(cls, work_dir: str | Path, create: bool = True) -> RunRandomness:
        """The secret key of the run in `work_dir`, from the key store (`key_path`): made there
        on the run's first start when `create` (rank 0), else only read (other ranks)."""
        path = key_path(work_dir)
        created = False
        if not os.path.lexists(path):
            if not create:
                raise DpvipInputError(
                    f"no key for {work_dir} at {path}: rank 0 makes it, so the key store (privacy.key_dir) "
                    "must be on a filesystem every rank shares"
                )
            created = _make_key(path)
        randomness = cls("secret", _read_key(path))
        randomness.created = created
        return randomness

    @classmethod
    def for_run(
        cls, mode: str, work_dir: str | Path | None, seed: int, fingerprint: dict, create: bool = True
    ) -> RunRandomness:
        """The randomness of one run: `secret`, the key of `work_dir` in the key store (made on
        the first start when `create`); `seeded`, derived from `seed`. Then one stream per run
        `fingerprint` (its settings, data and input checkpoint), so a run restarted with other
        settings or data never repeats the noise of the first, and the runs of one job (a
        study) draw independently."""
        check_randomness(mode)
        if mode == "seeded":
            return cls.seeded(seed).child(fingerprint)
        if work_dir is None:
            raise DpvipInputError("a DP run with secret randomness needs a private work folder for its key")
        parent = cls.secret(work_dir, create)
        child = parent.child(fingerprint)
        child.created = parent.created
        return child

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

    def material(self, purpose: str, *numbers: int) -> bytes:
        """256 bits of key material for (purpose, numbers): a noise stream's."""
        return self._digest(purpose, *(_number(n) for n in numbers))

    def identity(self) -> str:
        """A name of this key that tells nothing about it (a keyed digest): a resume state
        records it, and a state of another key is not resumed."""
        return self._digest("identity").hex()[:16]

    def entropy(self, purpose: str, *numbers: int) -> int:
        """256 bits for (purpose, numbers): a numpy SeedSequence's entropy."""
        return int.from_bytes(self._digest(purpose, *(_number(n) for n in numbers)), "big")

    def seed(self, purpose: str, *numbers: int) -> int:
        """63 bits for (purpose, numbers): per-example draws, which need no secrecy (see the
        module's note); never the noise or the batches."""
        return int.from_bytes(self._digest(purpose, *(_number(n) for n in numbers))[:8], "big") >> 1


def _number(value: int) -> bytes:
    value = int(value)
    if value < 0:
        raise DpvipInputError(f"a randomness derivation takes non-negative numbers, not {value}")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def key_store() -> Path:
    """The folder of the run keys: `DPVIP_KEY_DIR`, else `.dpvip/keys` in the working directory."""
    return Path(os.environ.get(KEY_DIR_ENV) or DEFAULT_KEY_DIR)


def use_key_store(key_dir: str | Path, keep: bool) -> None:
    """Set the key store (`privacy.key_dir`, made absolute) and `privacy.keep_keys` for this
    process and the jobs it starts: the workflow calls it once, jobs inherit it."""
    os.environ[KEY_DIR_ENV] = str(Path(key_dir).absolute())
    os.environ[KEEP_KEYS_ENV] = "true" if keep else "false"


def key_path(work_dir: str | Path) -> Path:
    """The key file of the run whose private work folder is `work_dir`: the folder's path
    relative to the working directory, under the key store (`results/x.work` ->
    `.dpvip/keys/results/x.work.key`); a folder outside it keeps its absolute path under
    `_absolute/`. A key store thus belongs to one working directory, as results/ does."""
    folder = Path(os.path.abspath(work_dir))
    try:
        relative = folder.relative_to(Path.cwd())
    except ValueError:
        relative = Path("_absolute", *folder.parts[1:])
    return key_store() / relative.with_name(relative.name + KEY_SUFFIX)


def keep_keys() -> bool:
    return os.environ.get(KEEP_KEYS_ENV, "").lower() in ("1", "true", "yes")


def release_key(work_dir: str | Path | None) -> None:
    """Delete the key of the run in `work_dir` once its results are written (unless
    `privacy.keep_keys`): nothing can regenerate its noise any more, and a rerun starts over."""
    if work_dir is not None and not keep_keys():
        key_path(work_dir).unlink(missing_ok=True)


def _open_store(folder: Path, create: bool) -> None:
    """Check the key store and every folder from it down to `folder` (making the missing ones
    with mode 0700 when `create`), on every open: the store must be a folder of this user with
    mode 0700, and nothing below it a symlink or another user's (a symlinked sub-folder would
    put keys where others can read them)."""
    store = key_store()
    if create:
        store.mkdir(mode=0o700, parents=True, exist_ok=True)
    _check_folder(store, store, "key store")
    mode = stat.S_IMODE(os.lstat(store).st_mode)
    if mode != 0o700:
        raise DpvipInputError(
            f"key store {store} has mode {mode:o}, not 700: others may read its keys "
            f"(chmod 700 {store}; privacy.key_dir)"
        )
    current = store
    for part in folder.relative_to(store).parts:
        current = current / part
        if create:
            try:
                current.mkdir(mode=0o700)
            except FileExistsError:  # there already, or made by a rank racing this one: checked next
                pass
        _check_folder(current, store, "folder")


def _check_folder(folder: Path, store: Path, what: str) -> None:
    """Refuse `folder` unless it is a folder of this user and not a symlink."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        raise DpvipInputError(f"{what} {folder} does not exist: no key was made there (key store {store})") from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise DpvipInputError(
            f"{what} {folder} in the key store must be a folder of this user, not a symlink (key store {store}, "
            "privacy.key_dir)"
        )


def _make_key(path: Path) -> bool:
    """Write a fresh key at `path`; False when another start made it first."""
    _open_store(path.parent, create=True)
    # Written whole under another name, then linked into place: a reader never sees a partial
    # key, and of two first starts racing, one key wins and both use it.
    fresh = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    handle = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(handle, secrets.token_bytes(KEY_BYTES))
        os.fsync(handle)
    finally:
        os.close(handle)
    try:
        os.link(fresh, path)
        return True
    except FileExistsError:
        return False
    finally:
        fresh.unlink()


def _read_key(path: Path) -> bytes:
    """The key at `path`, refused unless a regular file (not a symlink) of this user, mode 0600,
    in a key store that passes `_open_store`."""
    _open_store(path.parent, create=False)
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as err:
        raise DpvipInputError(f"key {path} cannot be opened ({err.strerror}): a key must not be a symlink") from None
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) != 0o600:
            raise DpvipInputError(
                f"key {path} is refused: a key must be a regular file of this user with mode 0600 "
                f"(it has mode {stat.S_IMODE(info.st_mode):o}); delete it to make a new one"
            )
        key = os.read(handle, KEY_BYTES + 1)
    finally:
        os.close(handle)
    if len(key) != KEY_BYTES:
        raise DpvipInputError(f"{path} holds {len(key)} bytes, not a key of {KEY_BYTES}: delete it to start over")
    return key
