"""The ``desched`` command: simulate | validate | version (run, extender and snapshot to follow).

Bad input ends in one line on stderr naming the field and the reason, and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

import msgspec
import yaml

from desched import __version__
from desched.api.errors import UserError

log = logging.getLogger("desched")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep it to one line
        self.exit(2, f"desched: error: {message}\n")


def _parse_now(text: str) -> datetime:
    try:
        value = msgspec.convert(text, datetime)
    except msgspec.ValidationError:
        raise UserError("--now", f"must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got {text!r}") from None
    if value.tzinfo is None:
        raise UserError("--now", f"must carry a time zone (e.g. a trailing Z), got {text!r}")
    return value.astimezone(UTC)


def _format_now(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="desched", description="A Kubernetes descheduler.")
    parser.add_argument("-v", "--v", dest="verbosity", type=int, default=0, help="log verbosity (0-5)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sim = sub.add_parser("simulate", help="run one descheduling cycle on a cluster snapshot, evicting nothing")
    sim.add_argument("snapshot", help="cluster snapshot: a v1 List (JSON or YAML) or multi-document YAML")
    sim.add_argument("--policy", required=True, help="DeschedulerPolicy file (descheduler/v1alpha2 or v1alpha1)")
    sim.add_argument("--now", help="the clock for age-based decisions, RFC 3339 (default: the current time)")
    sim.add_argument("--output", "-o", choices=["table", "json"], default="table")

    val = sub.add_parser("validate", help="check a policy file and print it normalised (defaults filled in)")
    val.add_argument("policy")
    val.add_argument("--output", "-o", choices=["yaml", "json"], default="yaml")

    sub.add_parser("version", help="print the version")
    return parser


def _cmd_version(args: argparse.Namespace) -> int:
    print(f"desched {__version__}")
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from desched.api.policy import load_policy_file
    from desched.framework.registry import default_registry

    policy = load_policy_file(args.policy, default_registry())
    doc = policy.normalised()
    if args.output == "json":
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
    for warning in policy.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from desched.api.policy import load_policy_file
    from desched.cluster.file_source import load_snapshot_file
    from desched.framework.evictor import SimulatedBackend
    from desched.framework.framework import Framework, FrameworkError
    from desched.framework.registry import default_registry
    from desched.report.output import write_json, write_table

    now = _parse_now(args.now) if args.now else datetime.now(UTC)
    registry = default_registry()
    policy = load_policy_file(args.policy, registry)
    snapshot = load_snapshot_file(args.snapshot)
    pods_total = len(snapshot.pods)
    try:
        framework = Framework(policy, registry, clock=lambda: now)
    except FrameworkError as e:
        raise UserError("policy", str(e)) from None
    result = framework.run_cycle(snapshot, SimulatedBackend(snapshot))
    if args.output == "json":
        write_json(result, sys.stdout, now=_format_now(now))
    else:
        write_table(result, sys.stdout, now=_format_now(now), pods_total=pods_total)
    return 0


_COMMANDS = {"simulate": _cmd_simulate, "validate": _cmd_validate, "version": _cmd_version}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING if args.verbosity <= 0 else logging.INFO if args.verbosity < 4 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        return _COMMANDS[args.command](args)
    except UserError as e:
        print(f"desched: error: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
