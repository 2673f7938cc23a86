"""`dpvip privacy epsilon|sigma`: the accountants on the command line."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from dpvip.cli._common import OneLineParser, command_group, print_record
from dpvip.errors import DpvipInputError
from dpvip.privacy import ACCOUNTANTS

# Accounting loads opacus and dp-accounting only where a number is computed.


def _broadcast(values: list, count: int, flag: str) -> list:
    if len(values) == count:
        return values
    if len(values) == 1:
        return values * count
    raise DpvipInputError(f"{flag} is given {len(values)} times; give it once or {count} times")


def _mechanisms(args: argparse.Namespace) -> list:
    from dpvip.privacy.accounting import Mechanism

    count = max(len(args.noise_multiplier), len(args.steps), len(args.sample_rate))
    rates = _broadcast(args.sample_rate, count, "--sample-rate")
    sigmas = _broadcast(args.noise_multiplier, count, "--noise-multiplier")
    steps = _broadcast(args.steps, count, "--steps")
    return [Mechanism(q, s, t) for q, s, t in zip(rates, sigmas, steps)]


def cmd_epsilon(args: argparse.Namespace) -> int:
    from dpvip.privacy.accounting import epsilon

    mechanisms = _mechanisms(args)
    spent = epsilon(mechanisms, args.delta, args.accountant)
    record = asdict(spent) | {"mechanisms": [asdict(m) for m in mechanisms]}
    print_record(record, args.json, f"epsilon = {spent.epsilon:.6g} at delta = {spent.delta:g} ({spent.method})")
    return 0


def cmd_sigma(args: argparse.Namespace) -> int:
    from dpvip.privacy.accounting import noise_multiplier

    found = noise_multiplier(args.sample_rate, args.steps, args.epsilon, args.delta, args.accountant)
    record = asdict(found) | {"sample_rate": args.sample_rate, "steps": args.steps}
    print_record(
        record,
        args.json,
        f"noise multiplier = {found.noise_multiplier:.6g} spends epsilon = {found.epsilon:.6g} "
        f"at delta = {found.delta:g} ({found.method})",
    )
    return 0


def add_commands(commands) -> None:
    privacy_commands = command_group(commands, "privacy", "privacy accounting")
    common = OneLineParser(add_help=False)
    common.add_argument("--delta", type=float, required=True)
    common.add_argument("--accountant", choices=ACCOUNTANTS, default="rdp")
    common.add_argument("--json", action="store_true", help="print one JSON object")

    eps = privacy_commands.add_parser(
        "epsilon",
        parents=[common],
        help="epsilon spent by one or more (sample rate, sigma, steps) mechanisms",
        description="Repeat --noise-multiplier/--steps/--sample-rate to compose several "
        "mechanisms (a flag given once applies to all).",
    )
    eps.add_argument("--sample-rate", type=float, action="append", required=True)
    eps.add_argument("--noise-multiplier", type=float, action="append", required=True)
    eps.add_argument("--steps", type=int, action="append", required=True)
    eps.set_defaults(handler=cmd_epsilon)

    sigma = privacy_commands.add_parser("sigma", parents=[common], help="noise multiplier for a budget")
    sigma.add_argument("--sample-rate", type=float, required=True)
    sigma.add_argument("--steps", type=int, required=True)
    sigma.add_argument("--epsilon", type=float, required=True)
    sigma.set_defaults(handler=cmd_sigma)
