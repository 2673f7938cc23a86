"""`dpvip dprandp ...`: DP-RandP outside the workflow, from a workflow configuration file
(its `synthetic` and `dprandp` sections)."""

from __future__ import annotations

import argparse
from dpvip.cli._common import command_group


def _plan(path: str | None):
    """The DP-RandP plan of `path` layered over the embedded default, with the checks the
    workflow makes when planning (every private run's settings: batch <= n, delta < 1/n)."""
    from dpvip.config import layered_config, read_config_file
    from dpvip.errors import DpvipInputError
    from dpvip.plan.dprandp_private import private_settings
    from dpvip.plan.dprandp_rows import all_runs
    from dpvip.plan.dprandp_runs import DPRandPPlan

    # As `snakemake --configfile FILE`: the file over the embedded default, defaults filled.
    overlay = read_config_file(path) if path else {}
    try:
        config = layered_config(overlay)
        plan = DPRandPPlan(config["dprandp"], config["synthetic"]["datasets"], config.get("privacy"))
        for run in all_runs(plan):
            private_settings(plan, run)
    except DpvipInputError as err:
        if path is None:
            raise
        raise DpvipInputError(f"config file {path}: {err}") from None
    return plan


CONFIG_HELP = "a config file layered over the embedded config/config.yaml, as snakemake --configfile (default: none)"


def _private_run(plan, path: str):
    from dpvip.errors import DpvipInputError
    from dpvip.plan.dprandp_rows import all_runs

    runs = {run.path: run for run in all_runs(plan)}
    if path not in runs:
        raise DpvipInputError(f"no DP-RandP run '{path}' in this configuration (see `dpvip dprandp plan`)")
    return runs[path]


def cmd_plan(args: argparse.Namespace) -> int:
    from dpvip.plan.dprandp_rows import all_runs

    plan = _plan(args.config)
    for run in plan.phase1_runs():
        print(f"phase1 {run.name}: {run.model} on {run.dataset} ({run.method})")
    for run in all_runs(plan):
        print(run.path)
    return 0


def cmd_phase1(args: argparse.Namespace) -> int:
    from dpvip.randp.jobs import run_phase1_job

    plan = _plan(args.config)
    record = run_phase1_job(plan.phase1_of(args.name), plan.section["phase1"], args.data, args.out)
    print(f"{args.out}/model.pt: {record['steps']} steps on {record['samples']} images")
    return 0


def cmd_private(args: argparse.Namespace) -> int:
    from dpvip.errors import DpvipInputError
    from dpvip.randp.jobs import run_private_job
    from dpvip.plan.dprandp_private import private_settings

    plan = _plan(args.config)
    run = _private_run(plan, args.run)
    if run.warm and not args.init:
        raise DpvipInputError(f"run {run.path} starts from Phase I run {run.init}: give its model.pt with --init")
    data = plan.tasks[run.task]["data"]
    result = run_private_job(run, private_settings(plan, run), data, args.init if run.warm else None, args.out)
    spent = result["privacy"]["epsilon_spent"]
    budget = "no noise" if spent is None else f"epsilon {spent:.3f} at delta {result['privacy']['delta']:.3g}"
    print(f"{args.out}: test accuracy {result['accuracy']['test']:.2f}% (EMA), {budget}")
    return 0


def add_commands(commands) -> None:
    group = command_group(
        commands,
        "dprandp",
        "DP-RandP: Phase I, then Phases II and III",
        "dpvip dprandp plan --config site.yaml",
    )
    plan = group.add_parser("plan", help="list the Phase I and private runs of a configuration")
    plan.add_argument("--config", help=CONFIG_HELP)
    plan.set_defaults(handler=cmd_plan)
    phase1 = group.add_parser("phase1", help="contrastive pre-training on synthetic images (resumable)")
    phase1.add_argument("--config", help=CONFIG_HELP)
    phase1.add_argument("--name", required=True, help="a Phase I run of the plan, e.g. randp_wrn16_4")
    phase1.add_argument("--data", required=True, help="a synthetic dataset's index.json")
    phase1.add_argument("--out", required=True, help="run folder")
    phase1.set_defaults(handler=cmd_phase1)
    private = group.add_parser("private", help="Phases II and III of one run (resumable)")
    private.add_argument("--config", help=CONFIG_HELP)
    private.add_argument(
        "--run", required=True, help="a private run of the plan, e.g. private/CIFAR-10/cold/p0_eps1_seed0"
    )
    private.add_argument("--init", help="the Phase I model.pt of a warm run")
    private.add_argument("--out", required=True, help="result JSON (the state is kept beside it)")
    private.set_defaults(handler=cmd_private)
