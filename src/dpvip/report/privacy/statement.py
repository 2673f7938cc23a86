"""The bundle's privacy statement (PRIVACY.md and privacy.json): for every published file,
whether it is derived from private data and, if so, whether the runs' (epsilon, delta)
guarantee covers it, why, and the mechanisms behind it (accountant, q, sigma, T, C, delta,
epsilon, delta * n, where the randomness came from).

What is inside the guarantee: released weights, and anything computed from them and public
data only (post-processing). What is not: losses on private batches (computed without
noise), statistics of held-out private examples, non-private runs on private data, and a
cell picked as the best of several private runs on test accuracy (covered only by the
composition of those runs). The papers publish these, so the bundle does too, and says so.

Every file of the bundle must have a status here: an output without one stops the bundle
(a new table cannot be published before someone decides what it reveals).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from dpvip.errors import DpvipInputError
from dpvip.privacy.randomness import NOT_PRIVATE
from dpvip.report.privacy.grid import grid_compositions
from dpvip.report.privacy.mechanisms import mechanisms
from dpvip.report.privacy.totals import bundle_section, bundle_totals, total_line, totals

STATEMENT_FILES = ("PRIVACY.md", "privacy.json")


@dataclass(frozen=True)
class Status:
    private_data: bool  # derived from private data at all
    inside: str  # "yes", "partly", "no" (private_data only)
    why: str


PUBLIC = Status(False, "", "")
# Published outputs (a file's stem; `report`, `provenance`, `Snakefile`, `config` and
# `ro-crate-metadata` for the bundle's own files), in order: the first pattern that matches
# gives the status.
STATUSES: list[tuple[str, Status]] = [
    (r"privacy_audit", Status(False, "", "the papers' printed settings under public accountants")),
    (
        r"privacy_empirical",
        Status(False, "", "canaries only, run with the mechanisms' settings (q, sigma, T, C, delta): no private data"),
    ),
    (r"synthetic_datasets|synthetic_samples", Status(False, "", "generated images only")),
    (r"syn_vip_loss|syn_vip_reconstructions", Status(False, "", "(Syn)-ViP: pre-training on generated images")),
    (r"vip_table3", Status(False, "", "model sizes")),
    (r"vip_figure6", Status(False, "", "accounting at the paper's q and sigma")),
    (
        r"provenance",
        Status(
            True,
            "no",
            "config, code version, packages, hardware; each job's seconds and peak memory, which for a DP job "
            "follow its realised Poisson batches (without noise), as mehta_table10's timings do",
        ),
    ),
    (r"Snakefile|config", Status(False, "", "the workflow's entry point and the run's configuration")),
    (
        r"ro-crate-metadata",
        Status(False, "", "RO-Crate metadata: the bundle's file names and types, the workflow, the run's times"),
    ),
    (r"coverage", Status(False, "", "the papers' numbered tables and figures, and our outputs for them")),
    (
        r"compute_budget(_summary|_papers)?",
        Status(False, "", "FLOPs and GPU-hours from the config's shapes and steps; the papers' stated run times"),
    ),
    (
        r"vip_claims|claims|README",
        Status(
            True,
            "no",
            "verdicts from the tables' accuracies (post-processing of DP runs) and from DP training losses on "
            "private batches without noise (as in ViP Figures 3 and 4)",
        ),
    ),
    (
        r"vip_dp_runs",
        Status(
            True,
            "no",
            "its final training loss is computed on private batches without noise; the mechanism "
            "columns are settings (published because ViP Table 10 prints the loss)",
        ),
    ),
    (
        r"vip_figure(3a|3b|4a|4b|7)",
        Status(
            True,
            "no",
            "DP training-loss curves: losses on private batches without noise (published because "
            "ViP Figures 3, 4 and 7 show them)",
        ),
    ),
    (
        r"vip_table5",
        Status(
            True,
            "yes",
            "accuracy on the test split of the DP fine-tuned classifier (inside the fine-tuning's "
            "guarantee, from DP-MAE weights inside theirs): post-processing",
        ),
    ),
    (
        r"vip_table(1|10)",
        Status(
            True,
            "partly",
            "evaluations of the DP-MAE weights (inside the guarantee) on downstream data: post-processing; "
            "the exact count of private pre-training images each row prints (n) is published outside it, "
            "as every exact count is (counts_published)",
        ),
    ),
    (
        r"vip_(table\d+|figure1|figure5)",
        Status(
            True,
            "yes",
            "evaluations of the DP-MAE weights (inside the guarantee) on downstream data: post-processing",
        ),
    ),
    (
        r"dprandp_table3",
        Status(
            True,
            "partly",
            "the validation accuracy is a statistic of held-out examples of the private set, computed "
            "without noise (DP-RandP Table 3 reports it); the models themselves are inside",
        ),
    ),
    (
        r"dprandp_table(4|5|22|23)",
        Status(
            True,
            "partly",
            "private linear probes (private mean and full-batch steps, composed exactly): their test "
            "accuracy is inside; 'Non-private' columns train on private features without noise",
        ),
    ),
    (
        r"dprandp_figure5",
        Status(
            True,
            "no",
            "DP training-loss curves: losses on private batches without noise (published because "
            "DP-RandP Figure 5 shows them)",
        ),
    ),
    (
        r"dprandp_figure7",
        Status(False, "", "privacy accounting of the runs' settings (q, sigma, steps) and the paper's"),
    ),
    (
        r"dprandp_table(8|9)",
        Status(
            True,
            "no",
            "wall times of the jobs, as provenance.json publishes them: a DP job's follow its realised Poisson "
            "batches, without noise",
        ),
    ),
    (r"mehta_table(6|9)", Status(False, "", "hyper-parameters: the paper's and our configuration's")),
    (
        r"mehta_table(7|8)",
        Status(False, "", "hyper-parameters: the paper's and the settings our DP runs recorded (no data)"),
    ),
    (
        r"mehta_table10",
        Status(
            True,
            "no",
            "throughput of DP runs: wall times over the expected batch (public q n), but the timings follow "
            "the realised Poisson batches, without noise",
        ),
    ),
    (
        r"dprandp_(table\d+|figure\d+|claims)",
        Status(
            True,
            "partly",
            "test accuracy of the EMA of the DP iterates (post-processing: inside); columns at "
            "epsilon = inf clip without noise and are outside",
        ),
    ),
    (
        r"mehta_(table\d+|figure\w+|claims)",
        Status(
            True,
            "partly",
            "each run is (epsilon, delta)-DP, but each published cell is the best learning rate of a "
            "grid (on a validation share held out of the private set, whose examples the guarantee does "
            "not cover; on test accuracy in the paper's mode): it is covered by the composition of the "
            "grid's runs, not by one run's (epsilon, delta); 'Without privacy' columns train on private "
            "features without noise",
        ),
    ),
    (
        r"report",
        Status(True, "partly", "the Snakemake report holds every table and figure here: each keeps its status"),
    ),
]
MEHTA_SELECTION = (
    "learning rate picked on test accuracy (as Mehta et al. tune it): covered by the grid's composed "
    "epsilon (grid_composition), not by one run's"
)
PROBE_SELECTION = (
    "linear-probe learning rate picked on the test split (ViP's probe grid): the probe trains on "
    "downstream data, not on the private set, so the pick needs no composition"
)
# The default (`dpvip.selection`): nothing is picked on test data (hyperparameters_on_test_data
# is None; hyperparameter_selection says how the pick was made either way).
MEHTA_VALIDATION_SELECTION = (
    "learning rate picked on a validation share held out of the private training split (its "
    "examples are outside the guarantee); the pick is covered by the grid's composed epsilon "
    "(grid_composition), not by one run's"
)
PROBE_VALIDATION_SELECTION = (
    "linear-probe learning rate picked on a validation split held out of the downstream training "
    "data (not the private set: the pick needs no composition)"
)
# Outputs that hold other outputs (the Snakemake report): their mechanisms are their parts'.
INHERITS = ("report",)
# What the guarantee is about, and the choice made for exact counts (see `RELATION`).
UNIT = "one image (one example of a DP run's private training set)"
RELATION = {
    "neighbouring": "add/remove one example: the accountants (RDP, PRV, PLD, GDP) bound add/remove neighbours",
    "sensitivity": (
        "each example's clipped gradient (or clipped feature) has norm at most C, so a sum of them changes by at "
        "most C when one example is added or removed; the noise N(0, sigma^2 C^2) is calibrated to that. A release "
        "divided by n (q n for Poisson steps) divides by a count published outside the guarantee: the division "
        "is post-processing given n. Under replace-one, which a public n would suggest, the same sums change by "
        "up to 2C and the stated epsilon would not hold"
    ),
    "exact_counts": "published, outside the guarantee",
    "counts_published": [
        "n, the examples of each run (ledgers, privacy.json, model.pt `samples`), and delta * n",
        "the realised Poisson batch sizes (metrics.jsonl, batch-size summaries) and images seen",
    ],
    "why": (
        "the papers publish their dataset sizes; under add/remove an exact count is not covered by the "
        "guarantee (it changes by one between neighbours), so it is marked outside rather than claimed"
    ),
}


def status(output: str) -> Status:
    for pattern, found in STATUSES:
        if re.fullmatch(pattern, output):
            return found
    raise DpvipInputError(
        f"no privacy status for published output '{output}': say in dpvip/report/privacy/statement.py "
        "whether it is derived from private data and what covers it"
    )


def output_of(bundle_file: str) -> str:
    """`tables/vip_table1.csv` -> `vip_table1`; `report/report.html` -> `report`."""
    return Path(bundle_file).stem


ON_TEST = (MEHTA_SELECTION, PROBE_SELECTION)


def _on_test(results: list) -> bool:
    """Whether any of these results chose its hyper-parameter on test accuracy (a result that
    records no selection is an older one, which did)."""
    return any((r.get("selection") or {}).get("mode", "test") == "test" for r in results)


def _selection(output: str, records: list) -> str | None:
    dicts = [r for r in records if isinstance(r, dict)]
    if output.startswith("mehta_"):
        studies = [r for r in dicts if "runs" in r]
        return MEHTA_SELECTION if not studies or _on_test(studies) else MEHTA_VALIDATION_SELECTION
    probes = [r for r in dicts if r.get("evaluation", {}).get("task") == "linear_probe"]
    if not probes:
        return None
    return PROBE_SELECTION if _on_test(probes) else PROBE_VALIDATION_SELECTION


def build_statement(files: list[str], sources: dict[str, list[dict]]) -> dict:
    """The statement of a bundle holding `files` (bundle-relative), `sources` giving the result
    records each private-derived output was built from ({output: [record]}). An output said
    to be inside the guarantee (wholly or partly) with no DP run's ledger behind it is
    refused: nothing would back the claim."""
    entries: dict[str, dict] = {}
    for name in sorted(files):
        output = output_of(name)
        if output in entries:
            entries[output]["files"].append(name)
            continue
        found = status(output)
        entry = {"output": output, "files": [name], "private_data": found.private_data, "why": found.why}
        if found.private_data:
            records = sources.get(output, [])
            runs = mechanisms(records)
            selection = _selection(output, records)
            entry |= {
                "inside_guarantee": found.inside,
                "hyperparameters_on_test_data": selection if selection in ON_TEST else None,
                "hyperparameter_selection": selection,
                "mechanisms": runs,
                "delta_at_least_1_over_n": any((m["delta_n"] or 0) >= 1 for m in runs),
            }
            if output.startswith("mehta_"):
                entry["grid_composition"] = grid_compositions(records)
            entry["total_epsilon"] = totals(records)
        entries[output] = entry
    parts = [m for e in entries.values() if e["output"] not in INHERITS for m in e.get("mechanisms", [])]
    published = [e["output"] for e in entries.values() if e["private_data"] and e["output"] not in INHERITS]
    records = {output: sources.get(output, []) for output in published}
    bundle_total = bundle_totals(records, {output: entries[output]["total_epsilon"] for output in published})
    for entry in entries.values():
        if entry["private_data"] and entry["output"] in INHERITS:
            entry["mechanisms"] = list({json.dumps(m, sort_keys=True): m for m in parts}.values())
            entry["total_epsilon"] = [{key: t[key] for key in t if key != "outputs"} for t in bundle_total]
        if entry["private_data"] and entry["inside_guarantee"] != "no" and not entry["mechanisms"]:
            raise DpvipInputError(
                f"published output '{entry['output']}' is said to be inside the DP guarantee but no DP run's "
                "ledger is behind it: give its result files in the bundle's privacy sources"
            )
    modes = {m["randomness"] for entry in entries.values() for m in entry.get("mechanisms", [])}
    statement = {
        "randomness": "seeded" if "seeded" in modes else "secret",
        "private": "seeded" not in modes and "secret" in modes,
        "unit": UNIT,
        "relation": RELATION,
        "outputs": list(entries.values()),
        "total_epsilon": bundle_total,
    }
    return statement | ({"note": NOT_PRIVATE} if "seeded" in modes else {})


def stated_files(statement: dict) -> set[str]:
    return {name for entry in statement["outputs"] for name in entry["files"]}


def _number(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def render(statement: dict) -> str:
    """PRIVACY.md: what is inside the guarantee, what is not and why, the mechanisms."""
    lines = ["# Privacy statement", ""]
    if "note" in statement:
        lines += [f"**{statement['note']}.** Nothing in this bundle is covered by a DP guarantee.", ""]
    elif not statement["private"]:
        lines += ["No DP run is behind this bundle.", ""]
    else:
        lines += ["Every DP run drew its noise and batches from a per-run secret that nothing here contains.", ""]
    relation = statement["relation"]
    lines += [
        f"**Unit of privacy:** {statement['unit']}. **Neighbouring datasets:** {relation['neighbouring']}.",
        "",
        f"**Sensitivity:** {relation['sensitivity']}.",
        "",
        f"**Exact counts:** {relation['exact_counts']}: {'; '.join(relation['counts_published'])}. "
        f"Why: {relation['why']}.",
        "",
    ]
    private = [e for e in statement["outputs"] if e["private_data"]]
    lines += ["| output | inside the (epsilon, delta) guarantee | why | hyper-parameter selection |"]
    lines += ["| --- | --- | --- | --- |"]
    for entry in private:
        selection = entry.get("hyperparameter_selection", entry["hyperparameters_on_test_data"]) or ""
        flag = " (delta >= 1/n)" if entry["delta_at_least_1_over_n"] else ""
        lines.append(f"| {entry['output']}{flag} | {entry['inside_guarantee']} | {entry['why']} | {selection} |")
    lines += ["", "## Mechanisms behind each output", ""]
    for entry in private:
        lines.append(f"### {entry['output']}")
        for m in entry["mechanisms"]:
            delta_n = "" if m["delta_n"] is None else f", delta n = {m['delta_n']:.3g}"
            lines.append(
                f"- {m['runs']} run(s): {m['accountant']}, q = {m['q']:.4g}, sigma = {_number(m['sigma'])}, "
                f"T = {m['steps']}, C = {m['clip_norm']}, delta = {_number(m['delta'])}, "
                f"epsilon = {_number(m['epsilon'])}{delta_n}, randomness {m['randomness']}"
            )
        for total in entry.get("total_epsilon", []):
            lines.append(f"- {total_line(total)}")
        for grid in entry.get("grid_composition", []):
            lines.append(
                f"- a cell picked from a grid of {grid['runs']} such runs: composed epsilon "
                f"{grid['composed_epsilon']:.4g} at delta {_number(grid['delta'])} ({grid['accountant']}), "
                f"one run's {_number(grid['single_run_epsilon'])}"
            )
        lines.append("")
    lines += bundle_section(statement.get("total_epsilon", []))
    lines += ["", "## Not derived from private data", ""]
    lines += [f"- {e['output']}: {e['why']}" for e in statement["outputs"] if not e["private_data"]]
    return "\n".join(lines) + "\n"


def write_statement(bundle: Path, statement: dict) -> None:
    (bundle / "privacy.json").write_text(json.dumps(statement, indent=2, sort_keys=True) + "\n")
    (bundle / "PRIVACY.md").write_text(render(statement))
