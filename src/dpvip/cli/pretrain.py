"""`dpvip pretrain mae|dp-mae`: (Syn)-ViP and ViP training outside the workflow, on one
process or several (torchrun)."""

from __future__ import annotations

import argparse
import os

from dpvip.cli._common import command_group, positive_int, relaunched
from dpvip.plan.pretrain import WORKFLOW_KEYS


def _read_settings(path: str, settings_class, size: str):
    from dpvip.config import read_config_file

    return settings_class.from_config(read_config_file(path, "settings file", "settings (key: value)"), size)


def _train(args: argparse.Namespace, command: list[str], check_split, train) -> int:
    """Run `train()` here, or relaunch `command` (this command) under torchrun with --procs N."""
    if args.procs > 1 and "WORLD_SIZE" not in os.environ:
        check_split(args.procs)
    forwarded = [*command, "--settings", args.settings, "--size", args.size, "--data", args.data, "--out", args.out]
    status = relaunched(args.procs, forwarded + (["--init", args.init] if getattr(args, "init", None) else []))
    if status is not None:
        return status
    record = train()
    if os.environ.get("RANK", "0") == "0":
        privacy = record.get("privacy")
        spent = f", epsilon {privacy['epsilon_spent']:.3f} at delta {privacy['delta']:.3g}" if privacy else ""
        print(
            f"{args.out}/model.pt: {record['steps']} steps, {record['images_seen']} images, "
            f"{record['skipped_samples']} skipped{spent}"
        )
    return 0


def cmd_pretrain_mae(args: argparse.Namespace) -> int:
    from dpvip.train.mae_pretrain import pretrain_mae
    from dpvip.plan.pretrain import PretrainSettings

    settings = _read_settings(args.settings, PretrainSettings, args.size)
    return _train(args, ["pretrain", "mae"], settings.check_split, lambda: pretrain_mae(settings, args.data, args.out))


def cmd_pretrain_dp_mae(args: argparse.Namespace) -> int:
    from dpvip.train.dp_mae import dp_train_mae
    from dpvip.plan.dp_pretrain import DPPretrainSettings

    settings = _read_settings(args.settings, DPPretrainSettings, args.size)
    return _train(
        args, ["pretrain", "dp-mae"], lambda procs: None, lambda: dp_train_mae(settings, args.data, args.out, args.init)
    )


def _training_arguments(parser, settings_keys: str) -> None:
    from dpvip.models import MAE_SIZES

    parser.add_argument(
        "--settings",
        required=True,
        help=f"YAML/JSON of training settings: {settings_keys} (see config/README.md)",
    )
    parser.add_argument("--size", required=True, help=f"MAE size ({', '.join(MAE_SIZES)}) or <size>_dec<depth>")
    parser.add_argument("--data", required=True, help="index.json of the training shards")
    parser.add_argument("--out", required=True, help="run folder")
    parser.add_argument(
        "--procs", type=positive_int, default=1, help="processes (GPUs) on this node, launched with torchrun"
    )


def add_commands(commands) -> None:
    pretrain_commands = command_group(
        commands,
        "pretrain",
        "MAE pre-training, non-private and DP",
        "dpvip pretrain mae --settings examples/syn_vip_micro.yaml --size micro --data shaders/index.json --out run",
    )
    mae = pretrain_commands.add_parser(
        "mae",
        help="masked-autoencoder pre-training on webdataset shards ((Syn)-ViP)",
        description="Resumes from OUT/work/state.pt if present; writes OUT/model.pt and OUT/metrics.jsonl.",
    )
    _training_arguments(
        mae, f"the keys of pretrain.syn_vip but its workflow keys ({', '.join(WORKFLOW_KEYS)}), which are refused"
    )
    mae.set_defaults(handler=cmd_pretrain_mae)
    dp_mae = pretrain_commands.add_parser(
        "dp-mae",
        help="DP masked-autoencoder training with Poisson sampling and DP-AdamW (ViP)",
        description="Calibrates sigma for (epsilon, delta, q, T), then trains; resumes from OUT/work/state.pt "
        "(refusing another q, sigma or C); writes OUT/model.pt (with the privacy ledger) and OUT/metrics.jsonl.",
    )
    _training_arguments(dp_mae, "the keys of dp_pretrain.settings")
    dp_mae.add_argument(
        "--init", help="MAE checkpoint to start from (a (Syn)-ViP model.pt); default: random initialisation"
    )
    dp_mae.set_defaults(handler=cmd_pretrain_dp_mae)
