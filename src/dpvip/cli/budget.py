"""`dpvip budget [--configfile FILE ...] [TARGET ...]`: the compute budget of a workflow target
(FLOPs, A100/H100 GPU-hours, the Slurm runtime check, the smoke run's peak RSS, the papers'
own run times beside ours)."""

from __future__ import annotations

import argparse
import json

from dpvip.cli._common import with_example
from pathlib import Path

EXIT_RUNTIME_PROBLEM = 1


def _default(path: Path) -> str | None:
    return str(path) if path.exists() else None


def cmd_budget(args: argparse.Namespace) -> int:
    from dpvip.budget.compute import SMOKE_CONFIG, compute_budget, write_budget_tables

    snakefile = Path(args.snakefile)
    workflow_dir = snakefile.resolve().parent
    profile = args.profile if args.profile != "none" else None
    if args.profile is None:
        profile = _default(workflow_dir / "profiles" / "slurm")
    smoke = args.smoke_config if args.smoke_config != "none" else None
    if args.smoke_config is None:
        smoke = _default(workflow_dir / SMOKE_CONFIG)
    budget = compute_budget(snakefile, args.configfile, args.targets, profile, args.data_file, smoke, args.smoke_dir)
    frames = budget.frames()
    problems = budget.problems()
    if args.out:
        for path in write_budget_tables(budget, args.out):
            print(f"wrote {path} (.md, .tex)") if not args.json else None
    if args.json:
        record = {
            "summary": frames["compute_budget_summary"].to_dict(orient="records"),
            "papers": frames["compute_budget_papers"].to_dict(orient="records"),
            "runtime_problems": [budget.job.name for budget, _ in problems],
        }
        print(json.dumps(record, default=str))
    else:
        print(frames["compute_budget_summary"].to_markdown(index=False))
        print()
        print(frames["compute_budget_papers"].drop(columns=["statement"]).to_markdown(index=False))
        for job_budget, check in problems:
            print(
                f"runtime too short: {job_budget.job.name} needs {check.wall_hours:.3g} A100 hours on its GPUs, "
                f"gets {check.runtime_hours:.3g} h, and does not resume"
            )
    return EXIT_RUNTIME_PROBLEM if problems else 0


def add_commands(commands) -> None:
    budget = commands.add_parser(
        "budget",
        help="compute budget of a workflow target: FLOPs, GPU-hours, runtime check, smoke-run memory",
        description="Plans every job TARGET needs (default: the workflow's default target) with Snakemake, "
        "counts its FLOPs with torch.utils.flop_counter on its networks at their configured shapes, and gives "
        "GPU-hours on A100 and H100. Exits 1 when a GPU job's Slurm runtime is too short and it does not resume.",
        **with_example("dpvip budget --configfile config/paper.yaml"),
    )
    budget.add_argument("targets", nargs="*", metavar="TARGET", help="rule names or files (default: all)")
    budget.add_argument(
        "--configfile", nargs="+", default=[], help="config files over the embedded one (paper: config/paper.yaml)"
    )
    budget.add_argument("--snakefile", default="Snakefile", help="the dpvip workflow's Snakefile (default: here)")
    budget.add_argument(
        "--profile", default=None, help="Snakemake profile whose resources jobs get (default: profiles/slurm; none)"
    )
    budget.add_argument(
        "--smoke-config",
        default=None,
        help="the smoke run's config, layered over --configfile (default: config/smoke.yaml if present; none)",
    )
    budget.add_argument("--smoke-dir", default=".", help="where the smoke run ran (its results/benchmarks)")
    budget.add_argument(
        "--data-file", default=None, help="statements and dataset sizes (default: paper_values/compute_budget.yaml)"
    )
    budget.add_argument("--out", help="write compute_budget{,_summary,_papers}.{csv,md,tex} into this folder")
    budget.add_argument("--json", action="store_true", help="print one JSON object")
    budget.set_defaults(handler=cmd_budget)
