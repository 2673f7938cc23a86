"""A synthetic dataset as configured: family, size, resolution, shards, family options.

`DatasetSpec.from_config` checks every value and names the bad one in a one-line error,
so the command line and the workflow reject bad input the same way.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from dpvip.errors import DpvipInputError
from dpvip.synthetic import FAMILIES, family_class

ENCODINGS = ("png", "jpg")
SPEC_KEYS = ("family", "images", "resolution", "shard_size", "seed", "encoding", "options", "path")


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    family: str
    images: int
    resolution: int
    shard_size: int
    seed: int = 0
    encoding: str = "png"
    options: dict = field(default_factory=dict)
    path: str | None = None  # image_folder: the user's images (relative to the working directory)

    @classmethod
    def from_config(cls, name: str, values: dict) -> DatasetSpec:
        unknown = sorted(set(values) - set(SPEC_KEYS))
        if unknown:
            raise DpvipInputError(
                f"synthetic dataset '{name}': unknown key '{unknown[0]}' (known: {', '.join(SPEC_KEYS)})"
            )
        missing = [key for key in ("family", "images", "resolution", "shard_size") if key not in values]
        if missing:
            raise DpvipInputError(f"synthetic dataset '{name}': missing key '{missing[0]}'")
        spec = cls(name=name, **values)
        spec.check()
        return spec

    def check(self) -> None:
        where = f"synthetic dataset '{self.name}'"
        if self.family not in FAMILIES:
            raise DpvipInputError(f"{where}: family '{self.family}' is not one of {', '.join(FAMILIES)}")
        for key in ("images", "resolution", "shard_size"):
            value = getattr(self, key)
            if not _integer(value) or value < 1:
                raise DpvipInputError(f"{where}: {key} must be a positive integer (got {value!r})")
        if not _integer(self.seed) or self.seed < 0:
            raise DpvipInputError(f"{where}: seed must be a non-negative integer (got {self.seed!r})")
        if not isinstance(self.options, dict):
            raise DpvipInputError(
                f"{where}: options must be a mapping of option names to numbers (got {self.options!r})"
            )
        if self.encoding not in ENCODINGS:
            raise DpvipInputError(f"{where}: encoding '{self.encoding}' is not one of {', '.join(ENCODINGS)}")
        info = FAMILIES[self.family]
        if info.reads_path != (self.path is not None):
            need = "needs a path (the folder of its images)" if info.reads_path else "generates its images: no path"
            raise DpvipInputError(f"{where}: family {self.family} {need}")
        if info.power_of_two and self.resolution & (self.resolution - 1):
            raise DpvipInputError(
                f"{where}: resolution must be a power of two for {self.family} (got {self.resolution})"
            )
        for key, value in self.options.items():
            if key not in info.options:
                raise DpvipInputError(
                    f"{where}: option '{key}' does not apply to {self.family} (options: {', '.join(info.options)})"
                )
            kind = info.options[key]
            if not (_integer(value) or (kind is float and isinstance(value, float))) or value <= 0:
                raise DpvipInputError(f"{where}: option {key} must be a positive {kind.__name__} (got {value!r})")

    @property
    def shards(self) -> int:
        return math.ceil(self.images / self.shard_size)

    def shard_range(self, shard: int) -> range:
        """Global image indices of shard `shard`."""
        if not 0 <= shard < self.shards:
            raise DpvipInputError(
                f"synthetic dataset '{self.name}' has shards 0..{self.shards - 1} (asked for {shard})"
            )
        start = shard * self.shard_size
        return range(start, min(start + self.shard_size, self.images))

    def generator(self, device: str = "cpu"):
        """The family's generator; a combination of options it rejects is named in one line."""
        where = {"path": self.path, "images": self.images} if FAMILIES[self.family].reads_path else {}
        try:
            return family_class(self.family)(self.resolution, seed=self.seed, device=device, **self.options, **where)
        except ValueError as err:
            raise DpvipInputError(f"synthetic dataset '{self.name}': {err}") from None

    def describe(self) -> dict:
        """The spec as recorded in index.json and dataset.json (`name` stored as `dataset`;
        `path` only for a family that reads one, so generated families' records keep their form)."""
        fields = asdict(self)
        if fields["path"] is None:
            del fields["path"]
        return {"dataset": fields.pop("name"), **fields}
