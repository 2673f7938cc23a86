"""`dpvip privacy epsilon|sigma`: the accountants on the command line; `dpvip privacy
audit-empirical`: canaries through the DP step, and the epsilon they show."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from dpvip.cli._common import OneLineParser, command_group, open_unit_interval, positive_float, positive_int
from dpvip.cli._common import print_record, sample_rate
from dpvip.errors import DpvipInputError
from dpvip.audit import AUDITED_MECHANISMS
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


def cmd_audit_empirical(args: argparse.Namespace) -> int:
    from dpvip.files import read_json
    from dpvip.audit.bounds import AuditSettings, audit_summary
    from dpvip.audit.canaries import AuditMechanism, audit_mechanism, mechanism_from_ledger

    settings = AuditSettings(
        args.canaries,
        args.width,
        args.guesses,
        args.runs,
        args.subsampled_runs,
        args.confidence,
        args.black_box_canaries,
        args.canary_norm,
    )
    settings.check()  # before any accounting or training
    if args.ledger:
        mechanism = mechanism_from_ledger(args.mechanism, read_json(args.ledger, "--ledger"))
    else:
        missing = [
            f"--{k.replace('_', '-')}" for k in ("epsilon", "delta", "sample_rate", "steps") if getattr(args, k) is None
        ]
        if missing:
            raise DpvipInputError(f"give --ledger FILE, or {', '.join(missing)}")
        mechanism = AuditMechanism(
            args.mechanism, args.accountant, args.sample_rate, args.steps, args.epsilon, args.delta, args.clip_norm
        )
    mechanism.check()
    record = audit_mechanism(mechanism, settings)
    if args.out:
        from dpvip.files import write_json

        write_json(record, args.out)
    print_record(record, args.json, audit_summary(record))
    return 0


def add_commands(commands) -> None:
    privacy_commands = command_group(
        commands,
        "privacy",
        "privacy accounting",
        "dpvip privacy sigma --sample-rate 0.0625 --steps 16 --epsilon 8 --delta 1e-5 --accountant prv",
    )
    common = OneLineParser(add_help=False)
    common.add_argument("--delta", type=open_unit_interval, required=True, help="the delta of (epsilon, delta)-DP")
    common.add_argument("--accountant", choices=ACCOUNTANTS, default="rdp", help="how steps compose (default: rdp)")
    common.add_argument("--json", action="store_true", help="print one JSON object")

    eps = privacy_commands.add_parser(
        "epsilon",
        parents=[common],
        help="epsilon spent by one or more (sample rate, sigma, steps) mechanisms",
        description="Repeat --noise-multiplier/--steps/--sample-rate to compose several "
        "mechanisms (a flag given once applies to all).",
    )
    eps.add_argument(
        "--sample-rate", type=sample_rate, action="append", required=True, help="Poisson sampling rate q per step"
    )
    eps.add_argument(
        "--noise-multiplier",
        type=positive_float,
        action="append",
        required=True,
        help="sigma: the noise's std over the clipping norm",
    )
    eps.add_argument("--steps", type=positive_int, action="append", required=True, help="steps T")
    eps.set_defaults(handler=cmd_epsilon)

    sigma = privacy_commands.add_parser("sigma", parents=[common], help="noise multiplier for a budget")
    sigma.add_argument("--sample-rate", type=sample_rate, required=True, help="Poisson sampling rate q per step")
    sigma.add_argument("--steps", type=positive_int, required=True, help="steps T")
    sigma.add_argument("--epsilon", type=positive_float, required=True, help="the budget to spend in T steps")
    sigma.set_defaults(handler=cmd_sigma)

    audit = privacy_commands.add_parser(
        "audit-empirical",
        help="lower-bound a DP mechanism's epsilon with white-box gradient canaries",
        description="Runs the mechanism (from a run's ledger, or given) through the DP step with "
        "canaries, each in the training set with probability 1/2, and prints the one-run "
        "(Steinke et al.) and tight (Nasr et al.) lower bounds beside the claimed epsilon, each with its "
        "power (the largest value it could report; below the claim: it cannot refute the claim), and "
        "the Gaussian trade-off estimate (not a bound for a subsampled mechanism).",
    )
    audit.add_argument("--mechanism", choices=AUDITED_MECHANISMS, required=True, help="which DP step to run")
    audit.add_argument("--ledger", help="a run's privacy.json or result file: audit its mechanism")
    audit.add_argument("--epsilon", type=positive_float, help="without --ledger: the claimed epsilon")
    audit.add_argument("--delta", type=open_unit_interval, help="without --ledger: the claimed delta")
    audit.add_argument("--sample-rate", type=sample_rate, help="without --ledger: Poisson sampling rate q")
    audit.add_argument("--steps", type=positive_int, help="without --ledger: steps T")
    audit.add_argument(
        "--accountant", choices=ACCOUNTANTS, default="prv", help="without --ledger: how sigma is calibrated"
    )
    audit.add_argument("--clip-norm", type=positive_float, default=1.0, help="per-example clipping norm C")
    from dpvip.audit.bounds import AuditSettings  # numpy only: the parser stays light

    defaults = AuditSettings()
    audit.add_argument("--canaries", type=int, default=defaults.canaries, help="gradient canaries per run (even)")
    audit.add_argument("--width", type=int, default=defaults.width, help="the audit network's layers are width x width")
    audit.add_argument(
        "--guesses", type=int, default=defaults.guesses, help="the k highest and k lowest scores guessed"
    )
    audit.add_argument("--runs", type=int, default=defaults.runs, help="runs the tight audit pools (q = 1)")
    audit.add_argument(
        "--subsampled-runs", type=int, default=defaults.subsampled_runs, help="runs the tight audit pools (q < 1)"
    )
    audit.add_argument("--confidence", type=open_unit_interval, default=0.95, help="confidence of the lower bounds")
    audit.add_argument(
        "--black-box-canaries", type=int, default=defaults.black_box_canaries, help="input canaries (<= 768)"
    )
    audit.add_argument(
        "--canary-norm", type=float, default=defaults.canary_norm, help="canaries' pre-clip norm, in units of C"
    )
    audit.add_argument("--out", help="also write the record to this JSON file")
    audit.add_argument("--json", action="store_true", help="print one JSON object")
    audit.set_defaults(handler=cmd_audit_empirical)
