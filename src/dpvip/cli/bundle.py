"""`dpvip bundle verify`: check a results bundle against its manifest and its privacy
statement (every published file has a status; a seeded bundle is said to be not private),
and say whether its RO-Crate metadata is there."""

from __future__ import annotations

import argparse
from pathlib import Path

from dpvip.cli._common import command_group
from dpvip.errors import DpvipInputError


def cmd_bundle_verify(args: argparse.Namespace) -> int:
    from dpvip.report.bundle.build import verify_bundle
    from dpvip.report.bundle.crate import CRATE

    if not Path(args.directory).is_dir():
        raise DpvipInputError(f"bundle directory {args.directory} does not exist")
    result = verify_bundle(args.directory, args.allow_not_private)
    for name in result.missing:
        print(f"missing: {name}")
    for name in result.changed:
        print(f"changed: {name}")
    for name in result.unlisted:
        print(f"not in manifest: {name}")
    for name in result.unstated:
        print(f"published without a privacy status (not in privacy.json): {name}")
    if result.not_private:
        allowed = (
            "allowed by --allow-not-private" if args.allow_not_private else "refused (--allow-not-private accepts it)"
        )
        print(f"{result.not_private}: this bundle's DP runs are not private (see PRIVACY.md); {allowed}")
    if result.crate:
        print(f"{CRATE}: the bundle as a Workflow Run RO-Crate (its hash is in the manifest)")
    else:
        print(f"no {CRATE} in the manifest (a bundle built before the RO-Crate)")
    if result.ok:
        print(f"bundle {args.directory}: every file matches its hash and has a privacy status")
        return 0
    return 1


def add_commands(commands) -> None:
    bundle_commands = command_group(commands, "bundle", "results bundle", "dpvip bundle verify results/bundle")
    verify = bundle_commands.add_parser("verify", help="check every file against MANIFEST.sha256")
    verify.add_argument("directory", help="the bundle's folder (the workflow writes results/bundle)")
    verify.add_argument(
        "--allow-not-private",
        action="store_true",
        help="pass a bundle of seeded runs (tests, reproductions: NOT PRIVATE); refused without it",
    )
    verify.set_defaults(handler=cmd_bundle_verify)
