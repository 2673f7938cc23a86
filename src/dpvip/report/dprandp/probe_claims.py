"""DP-RandP's claims on the private linear probing studies (Tables 4 and 5, `dp_transfer.
dprandp_probe`): the probe grows with epsilon, the embedding layer against Phase II only, the
probe at epsilon 0.1 against DP-SGD from scratch at 1 (equivalence), w/o Phase II against the
noiseless probe."""

from __future__ import annotations

import math

from dpvip.plan.dprandp_rows import COLD_ROW, WARM_NO_PHASE2
from dpvip.plan.dprandp_runs import epsilon_label
from dpvip.report.claims.catalogue import Claim, StudyGroups
from dpvip.report.dprandp.claim_runs import CATALOGUE, LINEAR_PROBING, ClaimRuns, fmt_group

PROBE_CIFAR, PROBE_IMAGENET = "dprandp_probe_cifar", "dprandp_probe_imagenet"  # Tables 4 and 5's studies
PROBE_ROW, NON_PRIVATE = "Ours", "Non-private"
_claim, _absent = CATALOGUE.judged, CATALOGUE.untested


def probe_epsilons(probes: StudyGroups, study: str) -> list[tuple[float, str]]:
    columns = [c for c in probes.columns(study, PROBE_ROW) if c.startswith("epsilon=")]
    found = sorted((float(c.removeprefix("epsilon=")), c) for c in columns)
    return [(e, c) for e, c in found if math.isfinite(e)]


def probe_growth(key: str, probes: StudyGroups, study: str) -> Claim:
    """The probe at its largest finite epsilon against its smallest."""
    found = probe_epsilons(probes, study)
    if len(found) < 2:
        return _absent(key, f"{study} is not run with two epsilons in this configuration (dp_transfer.dprandp_probe)")
    (small, low), (large, high) = found[0], found[-1]
    groups = {"better": probes.group(study, PROBE_ROW, high), "worse": probes.group(study, PROBE_ROW, low)}
    measured = f"{study}: epsilon {large:g} {fmt_group(groups['better'])} vs {small:g} {fmt_group(groups['worse'])}"
    return _claim(key, groups, measured)


def embedding_claim(ours: ClaimRuns, probes: StudyGroups, epsilon: float) -> Claim:
    """Claim ag: the probe study's linear head on the embedding layer against Phase II only
    (the network without it) at the smallest epsilon."""
    column = next((c for e, c in probe_epsilons(probes, PROBE_CIFAR) if e == epsilon), None)
    if column is None:
        return _absent("ag", f"{PROBE_CIFAR} has no run at epsilon {epsilon_label(epsilon)} in this configuration")
    groups = {"better": probes.group(PROBE_CIFAR, PROBE_ROW, column), "worse": ours.group(LINEAR_PROBING, epsilon)}
    measured = (
        f"epsilon {epsilon_label(epsilon)}: probe of the embedding layer ({PROBE_CIFAR}) "
        f"{fmt_group(groups['better'])} vs "
        f"{LINEAR_PROBING} {fmt_group(groups['worse'])} (different recipes: Tab. 22's against Phase II's)"
    )
    return _claim("ag", groups, measured)


def probe_matches_cold_claim(ours: ClaimRuns, probes: StudyGroups) -> Claim:
    """Claim w: the probe at epsilon 0.1 matches DP-SGD from scratch (our cold start) at
    epsilon 1: equivalence within the catalogue's margin."""
    column = next((c for e, c in probe_epsilons(probes, PROBE_CIFAR) if e == 0.1), None)
    cold = ours.group(COLD_ROW, 1.0)
    if column is None or not cold.values:
        return _absent("w", f"no probe at epsilon 0.1 ({PROBE_CIFAR}) or no cold start at epsilon 1 here")
    groups = {"better": probes.group(PROBE_CIFAR, PROBE_ROW, column), "worse": cold}
    measured = f"probe at epsilon 0.1 {fmt_group(groups['better'])} vs {COLD_ROW} at epsilon 1 {fmt_group(cold)}"
    return CATALOGUE.equivalent("w", groups, measured)


def noiseless_probe_claim(ours: ClaimRuns, probes: StudyGroups) -> Claim:
    """Claim y: w/o Phase II at epsilon 2 beats the probe without noise."""
    if 2.0 not in ours.runs.get(WARM_NO_PHASE2, {}):
        return _absent(
            "y",
            "not run in this configuration: the private runs have no epsilon 2 "
            "(dprandp.private.tasks.CIFAR-10.schedule)",
        )
    noiseless = probes.group(PROBE_CIFAR, PROBE_ROW, NON_PRIVATE)
    if not noiseless.values:
        return _absent("y", f"{PROBE_CIFAR} has no noiseless run in this configuration")
    groups = {"better": ours.group(WARM_NO_PHASE2, 2.0), "worse": noiseless}
    measured = (
        f"{WARM_NO_PHASE2} at epsilon 2 {fmt_group(groups['better'])} vs the probe without noise {fmt_group(noiseless)}"
    )
    return _claim("y", groups, measured)
