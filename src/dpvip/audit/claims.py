"""The privacy settings the papers state, loaded from `config/paper_values/privacy_claims.yaml`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from dpvip.errors import DpvipInputError
from dpvip.privacy.accounting import ACCOUNTANTS, Mechanism


@dataclass(frozen=True)
class Claim:
    """One (q, sigma, T, delta, epsilon) statement of a paper.

    A mechanism's sigma is None where the paper prints none and derived it from epsilon.
    """

    id: str
    paper: str
    source: str
    setting: str
    n: int
    delta: float
    epsilon: float
    accountant: str
    mechanisms: tuple[tuple[float, float | None, int], ...]  # (sample_rate, sigma, steps)
    assumptions: str
    # The same claim at the values most favourable to it that print as the paper's (sigma
    # and n rounded as printed: `precision` in the claims file), or None where exact
    favourable: Claim | None = None
    precision: str = ""  # what the paper rounds, e.g. "sigma to 0.01, n to 1M"
    assumed: tuple[str, ...] = ()  # values the paper leaves implicit that a failure may rest on (T, n)

    @property
    def sigma_printed(self) -> bool:
        return all(sigma is not None for _, sigma, _ in self.mechanisms)

    def with_sigma(self, sigma: float) -> tuple[Mechanism, ...]:
        """The mechanisms, with `sigma` filled in where the paper printed none."""
        return tuple(Mechanism(q, sigma if s is None else s, t) for q, s, t in self.mechanisms)


def _delta(value: object, n: int, where: str) -> float:
    if value == "1/(2n)":
        return 1.0 / (2 * n)
    if value == "1/n":
        return 1.0 / n
    if isinstance(value, (int, float)) and 0 < value < 1:
        return float(value)
    raise DpvipInputError(f"{where}: delta {value!r} must be a number in (0, 1), '1/(2n)' or '1/n'")


def _mechanism(raw: dict, n: int, where: str) -> tuple[float, float | None, int]:
    if ("batch" in raw) == ("sample_rate" in raw):
        raise DpvipInputError(f"{where}: give exactly one of 'batch' or 'sample_rate'")
    sample_rate = raw["batch"] / n if "batch" in raw else float(raw["sample_rate"])
    sigma = raw.get("sigma")
    # Validates sample rate, steps and sigma with the accountant's own checks.
    Mechanism(sample_rate, 1.0 if sigma is None else float(sigma), raw.get("steps", 0))
    return sample_rate, None if sigma is None else float(sigma), int(raw["steps"])


def _claim(raw: dict, index: int, source: Path) -> Claim:
    where = f"{source} claim #{index + 1} ({raw.get('id', 'no id')})"
    required = {"id", "paper", "source", "setting", "n", "delta", "epsilon", "accountant", "mechanisms"}
    missing = sorted(required - raw.keys())
    if missing:
        raise DpvipInputError(f"{where}: missing key(s) {', '.join(missing)}")
    if raw["accountant"] not in ACCOUNTANTS:
        raise DpvipInputError(f"{where}: accountant {raw['accountant']!r} is not one of {ACCOUNTANTS}")
    n = int(raw["n"])
    try:
        mechanisms = tuple(_mechanism(m, n, where) for m in raw["mechanisms"])
    except DpvipInputError as err:
        raise DpvipInputError(f"{where}: {err}") from err
    if sum(sigma is None for _, sigma, _ in mechanisms) and len(mechanisms) > 1:
        raise DpvipInputError(f"{where}: a derived sigma (null) needs a single mechanism")
    if len(mechanisms) > 1 and any(q != 1.0 for q, _, _ in mechanisms):
        raise DpvipInputError(f"{where}: composed claims must be full-batch (sample rate 1)")
    precision = raw.get("precision") or {}
    unknown = sorted(set(precision) - {"sigma", "n"})
    if unknown:
        raise DpvipInputError(f"{where}: precision takes sigma and n, not {', '.join(unknown)}")
    favourable = None
    if precision:  # half a printed unit up: more noise, more data (a smaller q and delta)
        half_sigma, half_n = precision.get("sigma", 0) / 2, precision.get("n", 0) / 2
        favoured = dict(raw, n=n + half_n, precision=None, id=f"{raw['id']} (favourable rounding)")
        favoured["mechanisms"] = [
            dict(m, sigma=None if m.get("sigma") is None else float(m["sigma"]) + half_sigma) for m in raw["mechanisms"]
        ]
        favourable = _claim(favoured, index, source)
    return Claim(
        id=str(raw["id"]),
        paper=str(raw["paper"]),
        source=str(raw["source"]),
        setting=str(raw["setting"]),
        n=n,
        delta=_delta(raw["delta"], n, where),
        epsilon=float(raw["epsilon"]),
        accountant=raw["accountant"],
        mechanisms=mechanisms,
        assumptions=str(raw.get("assumptions", "")),
        favourable=favourable,
        precision=", ".join(
            f"{key} to {value:,g}" if value < 1000 else f"{key} to {value:,.0f}" for key, value in precision.items()
        ),
        assumed=tuple(raw.get("assumed") or ()),
    )


def load_claims(path: str | Path, papers: list[str] | None = None) -> list[Claim]:
    """Claims from `path`, optionally only those of `papers`; ids must be unique."""
    path = Path(path)
    if not path.is_file():
        raise DpvipInputError(f"claims file {path} does not exist")
    raw = yaml.safe_load(path.read_text()) or {}
    claims = [_claim(item, i, path) for i, item in enumerate(raw.get("claims", []))]
    ids = [c.id for c in claims]
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    if duplicated:
        raise DpvipInputError(f"{path}: duplicated claim id(s) {', '.join(duplicated)}")
    return [c for c in claims if papers is None or c.paper in papers]
