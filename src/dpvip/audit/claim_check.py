"""Check every privacy claim of the papers under each accountant.

For each claim: epsilon under rdp/prv/pld at the paper's sigma, whether the claim holds
under the accountant the paper used, and the sigma each accountant needs for the claimed
epsilon (what tighter accounting saves). Composed full-batch claims are audited through
their exactly equivalent single Gaussian mechanism.
"""

from __future__ import annotations

from dpvip.audit import ROUNDING_SLACK
from dpvip.privacy.accounting import ACCOUNTANTS, Mechanism, epsilon, noise_multiplier
from dpvip.audit.claims import Claim
from dpvip.privacy.gaussian import composed_sigma


def verdict(spent: float, claimed: float) -> str:
    if spent <= claimed:
        return "holds"
    if spent <= claimed * (1 + ROUNDING_SLACK):
        return "holds (rounding)"
    return "fails"


def claim_verdict(claim: Claim, spent: float) -> tuple[str, float | None]:
    """The verdict on `claim` given the epsilon its accountant spends, allowing for the
    paper's printed precision (sigma and n rounded as printed) and saying where a failure
    rests on values we assumed; and the epsilon at the favourable rounding (None: exact)."""
    found = verdict(spent, claim.epsilon)
    favourable_epsilon = None
    if claim.favourable is not None:
        mechanism, _ = _as_single_mechanism(claim.favourable)
        favourable_epsilon = epsilon([mechanism], claim.favourable.delta, claim.accountant).epsilon
        if found == "fails" and verdict(favourable_epsilon, claim.epsilon) != "fails":
            found = f"holds (printed precision: {claim.precision})"
    if found == "fails" and claim.assumed:
        found = f"fails under our assumptions ({', '.join(claim.assumed)})"
    return found, favourable_epsilon


def _as_single_mechanism(claim: Claim) -> tuple[Mechanism, str]:
    """The claim as one mechanism: itself, or the exact GDP equivalent of a composition."""
    if len(claim.mechanisms) == 1:
        q, sigma, steps = claim.mechanisms[0]
        if sigma is None:
            sigma = noise_multiplier(q, steps, claim.epsilon, claim.delta, claim.accountant).noise_multiplier
        return Mechanism(q, sigma, steps), ""
    parts = "; ".join(f"sigma={s:g} x {t} step(s)" for _, s, t in claim.mechanisms)
    sigma = composed_sigma((s, t) for _, s, t in claim.mechanisms)
    return Mechanism(1.0, sigma, 1), f"equivalent single Gaussian of: {parts}"


def audit_claim(claim: Claim, accountants: tuple[str, ...] = ACCOUNTANTS) -> dict:
    """One row of the privacy audit table."""
    mechanism, composition_note = _as_single_mechanism(claim)
    row = {
        "claim": claim.id,
        "paper": claim.paper,
        "source": claim.source,
        "setting": claim.setting,
        "n": claim.n,
        "q": mechanism.sample_rate,
        "sigma": mechanism.noise_multiplier,
        "sigma_printed": claim.sigma_printed,
        "steps": mechanism.steps,
        "delta": claim.delta,
        "delta_n": claim.delta * claim.n,  # >= 1: a delta that allows publishing an example outright
        "delta_at_least_1_over_n": claim.delta * claim.n >= 1,
        "claimed_epsilon": claim.epsilon,
        "paper_accountant": claim.accountant,
    }
    # The verdict's own accountant is always a column, even where `accountants` leaves it
    # out (PRV at the embedded scale): a verdict must not rest on a number the table hides.
    for name in dict.fromkeys([*accountants, claim.accountant]):
        row[f"epsilon_{name}"] = epsilon([mechanism], claim.delta, name).epsilon
    row["verdict"], row["epsilon_favourable_rounding"] = claim_verdict(claim, row[f"epsilon_{claim.accountant}"])
    for name in accountants:
        row[f"sigma_needed_{name}"] = noise_multiplier(
            mechanism.sample_rate, mechanism.steps, claim.epsilon, claim.delta, name
        ).noise_multiplier
    tightest = min(row[f"sigma_needed_{name}"] for name in accountants)
    row["noise_saving_pct"] = 100.0 * (1.0 - tightest / mechanism.noise_multiplier)
    row["assumptions"] = "; ".join(filter(None, [claim.assumptions, composition_note]))
    return row


def audit_claims(claims: list[Claim], accountants: tuple[str, ...] = ACCOUNTANTS) -> list[dict]:
    """Audit rows for `claims`, with a progress bar (calibration takes seconds per claim)."""
    from tqdm import tqdm

    return [audit_claim(claim, accountants) for claim in tqdm(claims, desc="privacy audit", unit="claim")]
