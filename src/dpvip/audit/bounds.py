"""Empirical lower bounds on epsilon from canary scores: what a run's outputs reveal, as
opposed to what the accountant says the code spends if it is right.

- `one_run_epsilon`: Steinke, Nasr and Jagielski, "Privacy Auditing with One (1) Training
  Run" (NeurIPS 2023), Theorem 3.1 with Appendix D's p-value. m canaries, each included
  independently with probability 1/2; the auditor guesses "in" for the k+ highest scores and
  "out" for the k- lowest and abstains on the rest; of its r guesses, v are right. An
  (epsilon, delta)-DP run makes v >= observed with probability at most
  P[Binomial(r, e^eps / (1 + e^eps)) >= v] + 2 m delta max_i P[v > Binomial >= v - i] / i;
  the bound is the largest epsilon for which that is below 1 - confidence. k+ and k- must be
  fixed before the scores are seen.
- `tight_epsilon`: many trials with and without one canary (Nasr et al., "Tight Auditing of
  Differentially Private Machine Learning", USENIX Security 2023): at a threshold on the
  score, the false positive and false negative rates' Clopper-Pearson upper bounds (FPR_u,
  FNR_u) give epsilon >= log((1 - delta - FNR_u) / FPR_u) (and the same with the rates
  swapped), which every (epsilon, delta)-DP mechanism satisfies. The threshold is chosen on
  half of the trials and the bound computed on the other half, so choosing it costs no
  confidence; the halves are drawn at random from a recorded seed (`split_seed`), so no order
  of the scores can favour a threshold.
- `gdp_epsilon`: the same trials read as Nasr et al. read them for DP-SGD, whose trade-off
  between its two score laws is Gaussian (mu-GDP): at a threshold, mu >= Phi^-1(1 - FPR_u) -
  Phi^-1(FNR_u), and epsilon at delta is the Gaussian mechanism's at that mu. It uses the
  bulk of the scores, not their tails, so it needs far fewer trials; it is exact for a
  full-batch step (a canary's score is a Gaussian shift) and, for the linear score of a
  Poisson-subsampled run, below the accountant's epsilon (the score's mu is q sqrt(T) / sigma).

Each column is a lower bound at the stated confidence on its own. The audit's headline, the
largest of the valid columns, holds at that confidence jointly only if each column in it is
read at 1 - (1 - confidence) / k for k columns (Bonferroni: a union bound, valid however the
columns depend on each other, as the one-run and tight white-box columns do through their
shared first run): `headline_confidence`. Each column keeps what it chose at its own
confidence (the one-run guesses, the tight threshold), so the headline is never above the
largest column.
"""

from __future__ import annotations

import math
import dataclasses
from dataclasses import dataclass

import numpy as np

from dpvip.errors import DpvipInputError

MAX_EPSILON = 50.0  # the search's ceiling: more than any score set here can show


def check_canaries(count: int) -> None:
    """Half of the canaries go in, on average: an even count of at least 2."""
    if count < 2 or count % 2:
        raise DpvipInputError(f"canaries {count} must be an even number of at least 2")


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise DpvipInputError(f"confidence {confidence} must be in (0, 1)")


def one_run_p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """P[at least v of r guesses right] for an (epsilon, delta)-DP run with m canaries."""
    from scipy import stats

    if not 0 <= v <= r <= m:
        raise DpvipInputError(f"need 0 <= correct ({v}) <= guesses ({r}) <= canaries ({m})")
    p = 1 / (1 + math.exp(-epsilon))  # randomized response's accuracy at epsilon
    tail = stats.binom.sf(v - 1, r, p)
    if delta == 0 or v == 0:
        return float(min(tail, 1.0))
    below = np.cumsum(stats.binom.pmf(v - np.arange(1, v + 1), r, p))  # P[v > B >= v - i], i = 1..v
    return float(min(tail + 2 * m * delta * np.max(below / np.arange(1, v + 1)), 1.0))


def one_run_epsilon(m: int, r: int, v: int, delta: float, confidence: float = 0.95) -> float:
    """The largest epsilon that v right guesses of r (m canaries) refute at `confidence`."""
    _check_confidence(confidence)
    level = 1 - confidence
    if one_run_p_value(m, r, v, 0.0, delta) >= level:
        return 0.0
    low, high = 0.0, MAX_EPSILON
    for _ in range(60):  # bisection: the p-value grows with epsilon; keep p(low) < level
        middle = (low + high) / 2
        if one_run_p_value(m, r, v, middle, delta) < level:
            low = middle
        else:
            high = middle
    return low


@dataclass(frozen=True)
class Guesses:
    canaries: int
    guesses: int
    correct: int


def one_run_guesses(scores: np.ndarray, included: np.ndarray, k_in: int, k_out: int) -> Guesses:
    """Guess "in" for the k_in highest scores and "out" for the k_out lowest."""
    scores, included = np.asarray(scores, dtype=float), np.asarray(included, dtype=bool)
    if k_in < 0 or k_out < 0 or k_in + k_out > len(scores):
        raise DpvipInputError(f"k_in {k_in} and k_out {k_out} must be >= 0 and sum to at most {len(scores)}")
    order = np.argsort(scores, kind="stable")
    right = int(included[order[len(order) - k_in :]].sum()) if k_in else 0
    right += int((~included[order[:k_out]]).sum())
    return Guesses(len(scores), k_in + k_out, right)


def one_run_bound(
    scores: np.ndarray, included: np.ndarray, k: int, delta: float, confidence: float = 0.95
) -> tuple[Guesses, float]:
    """One run's guesses on its k highest and k lowest scores, and the epsilon they refute."""
    guesses = one_run_guesses(scores, included, k, k)
    return guesses, one_run_epsilon(guesses.canaries, guesses.guesses, guesses.correct, delta, confidence)


def clopper_pearson_upper(failures, trials: int, level: float):
    """One-sided upper confidence bound at 1 - level on a rate seen `failures` of `trials`
    (`failures` a count or an array of counts)."""
    from scipy import stats

    failures = np.asarray(failures)
    upper = np.where(failures >= trials, 1.0, stats.beta.ppf(1 - level, failures + 1, np.maximum(trials - failures, 1)))
    return float(upper) if upper.ndim == 0 else upper


def _epsilon_at(fpr, fnr, delta: float):
    """log((1 - delta - FNR) / FPR), or with the rates swapped, whichever is larger (arrays too)."""
    fpr, fnr = np.asarray(fpr, dtype=float), np.asarray(fnr, dtype=float)
    with np.errstate(divide="ignore"):
        both = [
            np.where(a > 0, np.log(np.maximum(1 - delta - b, 1e-300) / np.maximum(a, 1e-300)), MAX_EPSILON)
            for a, b in ((fpr, fnr), (fnr, fpr))
        ]
    best = np.maximum(*both)
    return float(best) if best.ndim == 0 else best


def headline_confidence(confidence: float, columns: int) -> float:
    """The confidence each of `columns` bounds is read at so that their largest holds at
    `confidence` (Bonferroni)."""
    return 1 - (1 - confidence) / columns


def _halves(scores_in, scores_out, split_seed: int):
    """(choose_in, bound_in, choose_out, bound_out): each set cut at random (numpy's PCG64 from
    `split_seed`, fixed before the scores are seen) into a half the threshold is chosen on and
    one the bound is computed on, so choosing it costs no confidence whatever the scores' order."""
    scores_in, scores_out = np.asarray(scores_in, dtype=float), np.asarray(scores_out, dtype=float)
    if min(len(scores_in), len(scores_out)) < 4:
        raise DpvipInputError("a tight audit needs at least 4 trials with and 4 without the canary")
    rng = np.random.default_rng(split_seed)
    scores_in, scores_out = scores_in[rng.permutation(len(scores_in))], scores_out[rng.permutation(len(scores_out))]
    half_in, half_out = len(scores_in) // 2, len(scores_out) // 2
    return scores_in[:half_in], scores_in[half_in:], scores_out[:half_out], scores_out[half_out:]


def _upper_rates(threshold, inside: np.ndarray, outside: np.ndarray, level: float):
    """Clopper-Pearson upper bounds on (FPR, FNR) of guessing "in" above `threshold` (a number
    or an array of them)."""
    false_in = len(outside) - np.searchsorted(np.sort(outside), threshold, side="right")
    false_out = np.searchsorted(np.sort(inside), threshold, side="right")
    return clopper_pearson_upper(false_in, len(outside), level), clopper_pearson_upper(false_out, len(inside), level)


def tight_epsilon(
    scores_in: np.ndarray,
    scores_out: np.ndarray,
    delta: float,
    confidence: float = 0.95,
    split_seed: int = 0,
    chosen_at: float | None = None,
) -> float:
    """epsilon refuted at `confidence` by scores of trials with (in) and without (out) the canary.

    The threshold is the one whose Clopper-Pearson bound is largest on the choosing half (the
    bound the other half will be read with): a point estimate there prefers thresholds with
    0-1 errors in a far tail, which the bounding half rarely repeats (then the bound is 0).
    `chosen_at`: the confidence the threshold is chosen at (default `confidence`). The
    headline reads the column's own threshold at a stricter confidence, which can then only
    lower the bound; chosen again at that confidence, another threshold could read higher
    than the column. Any choice made on the choosing half alone leaves the bound valid."""
    chosen_at = confidence if chosen_at is None else chosen_at
    _check_confidence(confidence)
    _check_confidence(chosen_at)
    choose_in, bound_in, choose_out, bound_out = _halves(scores_in, scores_out, split_seed)
    level = (1 - confidence) / 2  # two rates, each bounded at half the risk
    choosing_level = (1 - chosen_at) / 2
    # candidate thresholds: the tails of the pooled choosing half, from the median outwards
    tails = np.geomspace(0.5, 2.0 / len(choose_out), 200)
    pooled = np.concatenate([choose_in, choose_out])
    candidates = np.unique(np.quantile(pooled, np.concatenate([tails, 1 - tails])))
    chosen = _epsilon_at(*_upper_rates(candidates, choose_in, choose_out, choosing_level), delta)
    threshold = candidates[int(np.argmax(chosen))]
    return max(0.0, _epsilon_at(*_upper_rates(threshold, bound_in, bound_out, level), delta))


def _perfect_rates(trials_in: int, trials_out: int, confidence: float) -> tuple[float, float]:
    """The Clopper-Pearson upper bounds on (FPR, FNR) of a threshold that makes no error on the
    bounding halves of `trials_in` and `trials_out` trials: the smallest the audit can see."""
    level = (1 - confidence) / 2
    return (
        clopper_pearson_upper(0, trials_out - trials_out // 2, level),
        clopper_pearson_upper(0, trials_in - trials_in // 2, level),
    )


def one_run_power(canaries: int, guesses: int, delta: float, confidence: float = 0.95) -> float:
    """The largest epsilon the one-run audit can report: every one of its guesses right."""
    return one_run_epsilon(canaries, guesses, guesses, delta, confidence)


def tight_power(trials_in: int, trials_out: int, delta: float, confidence: float = 0.95) -> float:
    """The largest epsilon `tight_epsilon` can report on these trials: no error on either half."""
    _check_confidence(confidence)
    return max(0.0, _epsilon_at(*_perfect_rates(trials_in, trials_out, confidence), delta))


def gdp_power(trials_in: int, trials_out: int, delta: float, confidence: float = 0.95) -> float:
    """The largest epsilon `gdp_epsilon` can report on these trials: no error on either half."""
    from scipy import stats

    _check_confidence(confidence)
    fpr, fnr = _perfect_rates(trials_in, trials_out, confidence)
    return min(gaussian_epsilon(float(stats.norm.isf(fpr) - stats.norm.ppf(fnr)), delta), MAX_EPSILON)


def gdp_mu(scores_in: np.ndarray, scores_out: np.ndarray, confidence: float = 0.95, split_seed: int = 0) -> float:
    """The mu of a Gaussian trade-off refuted at `confidence` (0 when none is)."""
    from scipy import stats

    _check_confidence(confidence)
    choose_in, bound_in, choose_out, bound_out = _halves(scores_in, scores_out, split_seed)
    level = (1 - confidence) / 2

    def mu_at(threshold: float, inside: np.ndarray, outside: np.ndarray) -> float:
        fpr, fnr = _upper_rates(threshold, inside, outside, level)
        return float(stats.norm.isf(fpr) - stats.norm.ppf(fnr))

    candidates = np.quantile(np.concatenate([choose_in, choose_out]), np.linspace(0.02, 0.98, 97))
    threshold = max(candidates, key=lambda t: mu_at(t, choose_in, choose_out))
    return max(0.0, mu_at(threshold, bound_in, bound_out))


def gdp_epsilon(
    scores_in: np.ndarray, scores_out: np.ndarray, delta: float, confidence: float = 0.95, split_seed: int = 0
) -> float:
    """epsilon at delta of the Gaussian trade-off that the trials refute (see `gdp_mu`)."""
    mu = gdp_mu(scores_in, scores_out, confidence, split_seed)
    return min(gaussian_epsilon(mu, delta), MAX_EPSILON) if mu > 0 else 0.0


# An audit record's columns (`canaries.audit_mechanism`): valid lower bounds whatever the
# mechanism's trade-off, and the estimate that assumes it is Gaussian. Each has its power
# (`<key>_power`): the largest value it can report with the audit's canaries, guesses, runs,
# delta and confidence. A column whose power is below the claim cannot refute it.
VALID_BOUNDS = {
    "one_run_white_box": "one-run white-box",
    "one_run_black_box": "one-run black-box",
    "tight_white_box": "tight white-box",
}
ESTIMATES = {"gdp_white_box": "white-box estimate (Gaussian trade-off, not a bound)"}
AUDIT_COLUMNS = VALID_BOUNDS | ESTIMATES
CANNOT_REFUTE = "cannot refute the claim"


def cannot_refute(record: dict) -> list[str]:
    """The labels of `record`'s columns whose power is below its claimed epsilon."""
    return [label for key, label in AUDIT_COLUMNS.items() if record[f"{key}_power"] < record["claimed_epsilon"]]


def audit_summary(record: dict) -> str:
    """One line: the claim, then each column's value and power, marked where it cannot refute."""
    parts = []
    for key, label in AUDIT_COLUMNS.items():
        power = record[f"{key}_power"]
        mark = f", {CANNOT_REFUTE}" if power < record["claimed_epsilon"] else ""
        parts.append(f"{label} {record[key]:.3g} (power {power:.3g}{mark})")
    return (
        f"{record['mechanism']}: claimed epsilon {record['claimed_epsilon']:.4g} at delta {record['delta']:g}; "
        f"audit lower bounds at {record['confidence']:.0%}: {'; '.join(parts[: len(VALID_BOUNDS)])}; "
        f"{'; '.join(parts[len(VALID_BOUNDS) :])}"
    )


@dataclass(frozen=True)
class AuditSettings:
    """How hard an audit looks: canaries per run, the audit network's width, the guesses of
    the one-run audit (the k highest and k lowest scores), runs pooled by the tight audit of a
    full-batch mechanism and of a Poisson-subsampled one (whose tight audit needs far more
    trials: its trade-off is far from the accountant's epsilon at rates a few thousand trials
    can see), input canaries of the black-box run (at most the 768 free pixels of its canvas).

    The white-box canaries' gradients are `canary_norm` x C before clipping, so the clipper is
    audited too (a layer it leaves unclipped lets them through whole).

    The embedded defaults give every mechanism a tight column whose power reaches a claim of 8
    (64,000 trials of a full-batch mechanism: 8.37 at delta 1e-5; 1,280,000 of a subsampled
    one: 11.4); the per-step scores of a subsampled mechanism reach about half of a claim of 8
    there (0.52-0.61 on average), a full-batch one's about 0.45."""

    canaries: int = 12_800
    width: int = 80
    guesses: int = 50
    runs: int = 5
    subsampled_runs: int = 100
    confidence: float = 0.95
    black_box_canaries: int = 700
    canary_norm: float = 10.0  # white-box canaries' gradient norm before clipping, in units of C

    def check(self) -> None:
        check_canaries(self.canaries)
        check_canaries(self.black_box_canaries)
        fewest = min(self.canaries, self.black_box_canaries)
        if not 0 < 2 * self.guesses <= fewest:
            raise DpvipInputError(f"guesses {self.guesses} must be positive and at most half of {fewest} canaries")
        if min(self.runs, self.subsampled_runs) < 1:
            raise DpvipInputError(f"runs {self.runs} and {self.subsampled_runs} must be at least 1")
        if not 0 < self.confidence < 1:
            raise DpvipInputError(f"confidence {self.confidence} must be in (0, 1)")
        if not (self.canary_norm >= 1 and math.isfinite(self.canary_norm)):
            raise DpvipInputError(
                f"canary norm {self.canary_norm} must be finite and at least 1 (in units of the clip norm)"
            )

    def runs_for(self, sample_rate: float) -> int:
        """Runs the tight audit pools for a mechanism sampling at `sample_rate`."""
        return self.runs if sample_rate >= 1 else self.subsampled_runs


def audit_settings(section: dict) -> AuditSettings:
    """The settings of `privacy.empirical` (its other keys say what to audit, not how)."""
    keys = [field.name for field in dataclasses.fields(AuditSettings)]
    return AuditSettings(**{key: section[key] for key in keys if key in section})


def gaussian_epsilon(mu: float, delta: float) -> float:
    """The exact epsilon at delta of the Gaussian mechanism of sensitivity 1 and noise 1/mu."""
    from dpvip.privacy import gaussian

    return gaussian.epsilon_for_delta(mu, delta)
