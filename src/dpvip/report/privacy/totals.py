"""The total epsilon of what is published together: every DP release on one private dataset,
composed (PLD; PRV where PLD cannot), for a table or figure and for the whole bundle.

- A release is one DP run, named by its ledger's `run` (its key's name) and counted once
  however many outputs publish it. A ledger without that name (a result written before it
  was recorded) counts each time it appears: more, never less.
- Releases compose when their ledgers name the same dataset (`data`: its source and where
  its training split is read, `dpvip.plan.data_paths.private_data_name`). Ledgers naming none
  compose with each other: more, never less.
- A DP-SGD run is `steps_done` rounds of the Poisson-subsampled Gaussian (q, sigma); the
  private probe is its full-batch gradient steps and its Gaussian mean. Runs of one (q,
  sigma) compose as one run of their summed steps (the same per-step mechanism), so the
  accountant sees one event per distinct (q, sigma) however many runs there are.
- The total is given at the largest delta of the releases it composes.
"""

from __future__ import annotations

from collections import Counter

from dpvip.errors import DpvipInputError
from dpvip.privacy import accounting
from dpvip.privacy.ledger import ledgers

UNNAMED = "(dataset not named)"
TOTAL_ACCOUNTANT = "pld"


def release_mechanisms(ledger: dict) -> list[tuple[float, float, int]]:
    """(q, sigma, steps) of each mechanism a run's ledger record says it ran ([]: no noise)."""
    if ledger.get("sigma_sgd") is not None:  # the private probe's record (`transfer.private_probe`)
        if not ledger.get("steps"):
            return []
        mean = [(1.0, ledger["sigma_mean"], 1)] if ledger.get("sigma_mean") else []
        return [(1.0, ledger["sigma_sgd"], int(ledger["steps"]))] + mean
    sigma, steps = ledger.get("noise_multiplier"), ledger.get("steps_done")
    if not sigma or not steps:
        return []
    return [(float(ledger.get("sample_rate", 1.0)), float(sigma), int(steps))]


def releases(records) -> dict[str, list[dict]]:
    """{dataset name: [ledger record]} of the distinct noisy DP releases inside `records`."""
    seen, grouped = set(), {}
    for ledger in ledgers(records):
        if not release_mechanisms(ledger):
            continue
        run = ledger.get("run")
        if run is not None:
            if run in seen:
                continue
            seen.add(run)
        grouped.setdefault(ledger.get("data") or UNNAMED, []).append(ledger)
    return grouped


def compose(group: list[dict]) -> dict:
    """The releases of `group` (ledger records on one dataset) composed: how many, the total
    epsilon at their largest delta, the accountant, and the largest single release's epsilon."""
    steps: Counter = Counter()
    for ledger in group:
        for q, sigma, count in release_mechanisms(ledger):
            steps[(q, sigma)] += count
    delta = max(float(ledger["delta"]) for ledger in group)
    mechanisms = [accounting.Mechanism(q, sigma, count) for (q, sigma), count in sorted(steps.items())]
    try:
        spent = accounting.epsilon(mechanisms, delta, TOTAL_ACCOUNTANT)
    except DpvipInputError:
        spent = accounting.epsilon(mechanisms, delta, "prv")
    single = [ledger.get("epsilon_spent", ledger.get("epsilon")) for ledger in group]
    return {
        "releases": len(group),
        "epsilon": spent.epsilon,
        "delta": delta,
        "accountant": spent.accountant,
        "largest_single_epsilon": max((float(e) for e in single if e is not None), default=None),
    }


def totals(records) -> list[dict]:
    """Per private dataset named in `records`: its releases composed (`compose`)."""
    return [{"data": name} | compose(group) for name, group in sorted(releases(records).items())]


def bundle_totals(by_output: dict[str, list], output_totals: dict[str, list[dict]]) -> list[dict]:
    """Every DP release behind the outputs (`by_output`: each one's records) composed per
    private dataset, each total with the outputs that publish releases on its dataset (read
    from `output_totals`, each output's own `totals`)."""
    on = {output: {t["data"] for t in found} for output, found in output_totals.items()}
    return [
        t | {"outputs": sorted(o for o in by_output if t["data"] in on.get(o, ()))}
        for t in totals(list(by_output.values()))
    ]


def _shown(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def total_line(total: dict) -> str:
    """One output's total on one dataset, as PRIVACY.md lists it under the output."""
    return (
        f"all {total['releases']} DP release(s) on {total['data']} composed: epsilon {total['epsilon']:.4g} "
        f"at delta {_shown(total['delta'])} ({total['accountant']})"
    )


def bundle_section(bundle: list[dict]) -> list[str]:
    """PRIVACY.md's section on everything published together (`bundle_totals`)."""
    lines = ["## Everything published together", ""]
    if not bundle:
        return lines + ["No DP release is behind this bundle."]
    lines += [
        "Every DP release behind this bundle, each run counted once however many outputs publish it, "
        "composed per private dataset (datasets named by their source and where their training split is read):",
        "",
        "| private dataset | releases | total epsilon | delta | accountant | largest single release | outputs |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t in bundle:
        lines.append(
            f"| {t['data']} | {t['releases']} | {t['epsilon']:.4g} | {_shown(t['delta'])} | {t['accountant']} | "
            f"{_shown(t['largest_single_epsilon'])} | {', '.join(t['outputs'])} |"
        )
    return lines


def total_notes(records) -> list[str]:
    """A table's or figure's note per private dataset behind it: its total epsilon."""
    notes = []
    for t in totals(records):
        note = (
            f"the {t['releases']} DP release(s) behind this output on {t['data']} compose to epsilon "
            f"{t['epsilon']:.4g} at delta {t['delta']:.3g} ({t['accountant']})"
        )
        single = t["largest_single_epsilon"]
        notes.append(note + (f"; one release is at most epsilon {single:.4g}" if single is not None else ""))
    return notes
