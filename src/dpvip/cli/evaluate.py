"""`dpvip evaluate run`: one ViP evaluation job outside Snakemake, in this process or as the
ranks of torchrun; the workflow launches its multi-process DP fine-tuning this way (the
job's evaluation and section travel in a settings file, `evaluation_settings`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from dpvip.cli._common import command_group, positive_int, relaunched
from dpvip.errors import DpvipInputError


def evaluation_settings(evaluation, section: dict) -> dict:
    """What the settings file of `dpvip evaluate run` holds: the evaluation and its section."""
    from dataclasses import asdict

    return {"evaluation": asdict(evaluation), "section": section}


def read_evaluation_settings(path: str | Path):
    """(Evaluation, section) from a settings file written from `evaluation_settings`."""
    from dpvip.config import read_config_file

    from dpvip.plan.vip_evaluations import Evaluation

    values = read_config_file(path, "settings file", "settings (evaluation, section)")
    missing = [key for key in ("evaluation", "section") if not isinstance(values.get(key), dict)]
    if missing:
        raise DpvipInputError(f"settings file {path} has no '{missing[0]}' mapping")
    try:
        evaluation = Evaluation(**values["evaluation"])
    except TypeError as err:
        fields = "task, backbone, dataset, shots"
        raise DpvipInputError(f"settings file {path}: 'evaluation' takes {fields} ({err})") from None
    from dpvip.evaluate.jobs import RUNNERS

    if evaluation.task not in RUNNERS:
        raise DpvipInputError(f"settings file {path}: task '{evaluation.task}' is not one of {', '.join(RUNNERS)}")
    return evaluation, values["section"]


def cmd_evaluate_run(args: argparse.Namespace) -> int:
    """Run the job here (joining torchrun's process group if started by it), or relaunch this
    command as --procs processes."""
    evaluation, section = read_evaluation_settings(args.settings)
    forwarded = ["evaluate", "run", "--settings", args.settings, "--out", args.out]
    forwarded += [*(["--checkpoint", args.checkpoint] if args.checkpoint else [])]
    status = relaunched(args.procs, forwarded + (["--standin", args.standin] if args.standin else []))
    if status is not None:
        return status
    from dpvip.evaluate.jobs import run_evaluation
    from dpvip.train.distributed import Distributed

    dist = Distributed.from_environment()
    try:
        record = run_evaluation(evaluation, section, args.checkpoint, args.out, args.standin, dist)
    finally:
        dist.close()
    if dist.is_main:
        columns = ", ".join(f"{name} {value:.4g}" for name, value in record["columns"].items())
        print(f"{args.out}: {columns} ({dist.world} processes)")
    return 0


def add_commands(commands) -> None:
    evaluate_commands = command_group(
        commands,
        "evaluate",
        "ViP's downstream evaluations of an encoder",
        "dpvip evaluate run --settings job.yaml --checkpoint results/pretrain/syn_vip_micro/model.pt --out probe.json",
    )
    run = evaluate_commands.add_parser(
        "run",
        help="one evaluation job (linear probe, few-shot, COCO, ADE20K or DP fine-tuning) of one backbone",
        description="Resumes from the job's private work folder (<out stem>.work) if a state is there; writes OUT "
        "(JSON: the table columns and what produced them). Under torchrun (or with --procs N) DP fine-tuning runs "
        "as N processes.",
    )
    run.add_argument(
        "--settings",
        required=True,
        help="YAML with 'evaluation' (task, backbone, dataset, shots) and 'section' (the job's part of the "
        "config's evaluate section)",
    )
    run.add_argument("--out", required=True, help="result JSON")
    run.add_argument("--checkpoint", help="the backbone's checkpoint (MAE model.pt, or a CNN's); default: none")
    run.add_argument("--standin", help="folder of the generated COCO stand-in (train.json, val.json)")
    run.add_argument("--procs", type=positive_int, default=1, help="processes on this node, launched with torchrun")
    run.set_defaults(handler=cmd_evaluate_run)
