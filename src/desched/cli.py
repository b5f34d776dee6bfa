"""The ``desched`` command: run | simulate | extender | snapshot | validate | version.

Bad input ends in one line on stderr naming the field and the reason, and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn

import msgspec
import yaml

from desched import __version__
from desched.api.errors import UserError

log = logging.getLogger("desched")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2 too; keep it to one line
        self.exit(2, f"desched: error: {message}\n")


def _parse_now(text: str) -> datetime:
    try:
        value = msgspec.convert(text, datetime)
    except msgspec.ValidationError:
        raise UserError(
            "--now", f"must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got {text!r}"
        ) from None
    if value.tzinfo is None:
        raise UserError("--now", f"must carry a time zone (e.g. a trailing Z), got {text!r}")
    return value.astimezone(UTC)


def _format_now(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="desched", description="A Kubernetes descheduler.")
    parser.add_argument("-v", "--v", dest="verbosity", type=int, default=0, help="log verbosity (0-5)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sim = sub.add_parser(
        "simulate", help="run one descheduling cycle on a cluster snapshot, evicting nothing"
    )
    sim.add_argument("snapshot", help="cluster snapshot: a v1 List (JSON or YAML) or multi-document YAML")
    sim.add_argument(
        "--policy", required=True, help="DeschedulerPolicy file (descheduler/v1alpha2 or v1alpha1)"
    )
    sim.add_argument("--now", help="the clock for age-based decisions, RFC 3339 (default: the current time)")
    sim.add_argument("--output", "-o", choices=["table", "json"], default="table")
    _add_placement_arguments(sim)

    val = sub.add_parser("validate", help="check a policy file and print it normalised (defaults filled in)")
    val.add_argument("policy")
    val.add_argument("--output", "-o", choices=["yaml", "json"], default="yaml")

    sub.add_parser("version", help="print the version")
    _add_run_parser(sub)

    _add_extender_parser(sub)

    snap = sub.add_parser("snapshot", help="save a live cluster as a snapshot file that simulate reads")
    snap.add_argument("-o", "--output", required=True, help="file to write (JSON v1 List)")
    snap.add_argument("--kubeconfig", "--client-connection-kubeconfig", dest="kubeconfig")
    snap.add_argument("--context")
    snap.add_argument("--events", action="store_true", help="include core/v1 Events")
    return parser


def _go_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "t", "yes"):
        return True
    if value in ("false", "0", "f", "no"):
        return False
    raise argparse.ArgumentTypeError(f"must be true or false, got {text!r}")


def _duration(text: str) -> float:
    from desched.api.types import parse_go_duration

    try:
        seconds = parse_go_duration(text).total_seconds()
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return seconds


def _add_run_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="deschedule a live cluster (upstream-compatible flags)")
    run.add_argument("--policy-config-file", required=True, help="DeschedulerPolicy file")
    run.add_argument(
        "--descheduling-interval",
        type=_duration,
        default=0.0,
        help="time between cycles, e.g. 5m; 0 runs one cycle and exits (default 0)",
    )
    run.add_argument(
        "--dry-run",
        type=_go_bool,
        nargs="?",
        const=True,
        default=False,
        help="evict nothing; report what would be evicted",
    )
    run.add_argument(
        "--kubeconfig",
        "--client-connection-kubeconfig",
        dest="kubeconfig",
        help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)",
    )
    run.add_argument("--context", help="kubeconfig context (default: the current one)")
    run.add_argument(
        "--client-connection-qps", type=float, default=0.0, help="API requests per second (0: no limit)"
    )
    run.add_argument("--client-connection-burst", type=int, default=0)
    run.add_argument("--leader-elect", type=_go_bool, nargs="?", const=True, default=False)
    run.add_argument("--leader-elect-lease-duration", type=_duration, default=137.0)
    run.add_argument("--leader-elect-renew-deadline", type=_duration, default=107.0)
    run.add_argument("--leader-elect-retry-period", type=_duration, default=26.0)
    run.add_argument("--leader-elect-resource-lock", default="leases", choices=["leases"])
    run.add_argument("--leader-elect-resource-name", default="descheduler")
    run.add_argument("--leader-elect-resource-namespace", default="kube-system")
    run.add_argument("--leader-elect-identity", default="", help="default: hostname_pid")
    run.add_argument(
        "--secure-port", type=int, default=10258, help="port for /metrics, /healthz, /readyz (0: off)"
    )
    run.add_argument("--bind-address", default="0.0.0.0")
    run.add_argument("--tls-cert-file", default="")
    run.add_argument("--tls-private-key-file", default="")
    run.add_argument(
        "--cert-dir", default="", help="where a self-signed certificate is written if none is given"
    )
    run.add_argument("--http", action="store_true", help="serve plain HTTP instead of HTTPS (local use only)")
    run.add_argument("--disable-metrics", type=_go_bool, nargs="?", const=True, default=False)
    run.add_argument(
        "--event-driven",
        action="store_true",
        help="also run a cycle soon after relevant cluster changes (nodes added, tainted, "
        "relabelled; pods failing)",
    )
    run.add_argument(
        "--event-debounce",
        type=_duration,
        default=5.0,
        help="how long to let a burst of changes settle before the early cycle (default 5s)",
    )


def _add_extender_parser(sub: Any) -> None:
    ext = sub.add_parser(
        "extender",
        help="serve a kube-scheduler HTTP extender scoring nodes with the generic node-resources scorer",
    )
    ext.add_argument(
        "--config",
        required=True,
        help="scorer args file (KEP-2143 keys: allocatable, allocated, left, requesting)",
    )
    ext.add_argument("--port", type=int, default=8888, help="port for the verbs, /healthz, /readyz, /metrics")
    ext.add_argument("--bind-address", default="0.0.0.0")
    ext.add_argument(
        "--kubeconfig",
        "--client-connection-kubeconfig",
        dest="kubeconfig",
        help="kubeconfig for the node and pod cache (default: as desched run)",
    )
    ext.add_argument("--context", help="kubeconfig context (default: the current one)")
    ext.add_argument("--snapshot", help="serve from a cluster snapshot file instead of a live cluster")
    ext.add_argument("--tls-cert-file", default="", help="serve HTTPS with this certificate (and key)")
    ext.add_argument("--tls-private-key-file", default="")
    ext.add_argument(
        "--timeout-budget",
        type=_duration,
        default=4.0,
        help="answer within this time, with what is computed so far (default 4s; "
        "kube-scheduler's httpTimeout defaults to 5s)",
    )


def _cmd_extender(args: argparse.Namespace) -> int:
    from desched.extender.server import ExtenderOptions, run_extender
    from desched.runtime.tls import serving_certificate
    from desched.scheduling.scorer import load_scorer_args

    scorer_args = load_scorer_args(args.config)
    if not 0 < args.port < 65536:
        raise UserError("--port", f"must be between 1 and 65535, got {args.port}")
    if args.timeout_budget <= 0:
        raise UserError("--timeout-budget", "must be more than 0")
    tls = None
    if args.tls_cert_file or args.tls_private_key_file:
        tls = serving_certificate(args.tls_cert_file, args.tls_private_key_file, "")
    return run_extender(
        ExtenderOptions(
            args=scorer_args,
            host=args.bind_address,
            port=args.port,
            kubeconfig=args.kubeconfig,
            context=args.context,
            snapshot=args.snapshot,
            tls=tls,
            budget=args.timeout_budget,
        )
    )


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


def _add_placement_arguments(sim: argparse.ArgumentParser) -> None:
    sim.add_argument(
        "--placement",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="place the evicted pods' replacements again as kube-scheduler would, and report "
        "where they land, which stay Pending and why, and the cluster before/after "
        "(default: on)",
    )
    sim.add_argument(
        "--score",
        choices=["default", "generic"],
        default=None,
        help="how placement scores nodes: kube-scheduler's default profile, or the generic "
        "node-resources scorer of --scorer-config (default: default)",
    )
    sim.add_argument(
        "--scorer-config",
        metavar="FILE",
        help="generic scorer args (KEP-2143 keys: allocatable, allocated, left, requesting); "
        "implies --score generic",
    )
    sim.add_argument(
        "--cycles",
        type=int,
        default=1,
        metavar="N",
        help="run up to N cycles, placing each cycle's pods before the next; stops early when a "
        "cycle evicts nothing, and flags thrashing (default 1)",
    )
    sim.add_argument(
        "--report",
        metavar="DIR",
        help="write an HTML report (DIR/index.html) with PNG charts; needs the 'report' extra",
    )


#: Above this, loading and simulating show a progress bar (when stderr is a terminal).
_BIG_SNAPSHOT_BYTES = 32 * 1024 * 1024
_BIG_SNAPSHOT_PODS = 20_000


class _Progress:
    """A rich progress bar on stderr for long runs; does nothing unless enabled."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None

    def start(self, description: str) -> None:
        if not self.enabled or self._progress is not None:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task(description, total=None)

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self._progress is None:
            return
        self._progress.update(
            self._task, description=phase, completed=done, total=total if total > 1 else None
        )

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _placement_options(args: argparse.Namespace) -> Any:
    from desched.scheduling.placement import SCORE_DEFAULT, SCORE_GENERIC, PlacementOptions
    from desched.scheduling.scorer import load_scorer_args

    score = args.score or (SCORE_GENERIC if args.scorer_config else SCORE_DEFAULT)
    if score == SCORE_DEFAULT and args.scorer_config:
        raise UserError("--scorer-config", "only applies with --score generic")
    if score == SCORE_GENERIC and not args.scorer_config:
        raise UserError("--score", "generic needs --scorer-config FILE (the generic scorer's args)")
    generic = load_scorer_args(args.scorer_config) if args.scorer_config else None
    return PlacementOptions(score=score, generic=generic)


def _cmd_simulate(args: argparse.Namespace) -> int:
    import os

    from desched.api.policy import load_policy_file
    from desched.cluster.file_source import load_snapshot_file
    from desched.framework.evictor import EvictionBackend, SimulatedBackend
    from desched.framework.framework import CycleResult, Framework, FrameworkError, PluginRun
    from desched.framework.nodeactions import SimulatedNodeActions
    from desched.framework.registry import default_registry
    from desched.report.output import (
        anomaly_findings,
        write_json,
        write_simulation_json,
        write_simulation_table,
        write_table,
    )

    now = _parse_now(args.now) if args.now else datetime.now(UTC)
    if args.cycles < 1:
        raise UserError("--cycles", f"must be at least 1, got {args.cycles}")
    if args.cycles > 1 and not args.placement:
        raise UserError("--cycles", "more than one cycle needs placement (drop --no-placement)")
    options = _placement_options(args) if args.placement else None
    if args.report:
        from desched.report.charts import require_matplotlib

        require_matplotlib()
    registry = default_registry()
    policy = load_policy_file(args.policy, registry)
    try:
        size = os.path.getsize(args.snapshot)
    except OSError:
        size = 0
    progress = _Progress(sys.stderr.isatty() and size >= _BIG_SNAPSHOT_BYTES)
    progress.start("loading the snapshot")
    try:
        snapshot = load_snapshot_file(args.snapshot)
        pods_total = len(snapshot.pods)
        if sys.stderr.isatty() and pods_total >= _BIG_SNAPSHOT_PODS:
            progress.enabled = True
            progress.start("simulating")
        try:
            framework = Framework(policy, registry, clock=lambda: now)
        except FrameworkError as e:
            raise UserError("policy", str(e)) from None
        if not args.placement and not args.report:
            # node downgrades are recorded, never applied; expired ones a live run would remove come first
            node_actions = SimulatedNodeActions(lambda: now)
            node_actions.restore_expired(snapshot.nodes)
            progress("descheduling", 0, 1)
            result = framework.run_cycle(snapshot, SimulatedBackend(snapshot), node_actions=node_actions)
            progress.stop()
            anomalies = anomaly_findings(framework.profiles)
            if args.output == "json":
                write_json(result, sys.stdout, now=_format_now(now), anomalies=anomalies)
            else:
                write_table(
                    result, sys.stdout, now=_format_now(now), pods_total=pods_total, anomalies=anomalies
                )
            return _plugin_failures(result.crashes)

        crashes: list[PluginRun] = []

        from desched.scheduling.placement import PlacementOptions, simulate

        def run_cycle(snap: Any, backend: EvictionBackend, cycle: int) -> CycleResult:
            actions = SimulatedNodeActions(lambda: now)
            if cycle == 1:
                actions.restore_expired(snap.nodes)
            result = framework.run_cycle(snap, backend, node_actions=actions)
            crashes.extend(result.crashes)
            return result

        sim = simulate(
            snapshot,
            run_cycle,
            now=now,
            cycles=args.cycles,
            options=options or PlacementOptions(),
            placement=args.placement,
            on_progress=progress,
        )
    finally:
        progress.stop()
    anomalies = anomaly_findings(framework.profiles)
    if args.output == "json":
        write_simulation_json(sim, sys.stdout, now=_format_now(now), anomalies=anomalies)
    else:
        write_simulation_table(
            sim, sys.stdout, now=_format_now(now), pods_total=pods_total, anomalies=anomalies
        )
    if args.report:
        from desched.report.html import write_report

        try:
            page = write_report(
                sim,
                args.report,
                now=_format_now(now),
                snapshot=args.snapshot,
                policy=args.policy,
                pods_total=pods_total,
            )
        except OSError as e:
            raise UserError("--report", f"cannot write the report: {e.strerror or e}") from None
        print(f"desched: report written to {page}", file=sys.stderr)
    return _plugin_failures(crashes)


#: Exit status when a plugin raised: the output is incomplete (not a user error, which is 2).
EXIT_PLUGIN_FAILED = 1


def _plugin_failures(crashes: Sequence[Any]) -> int:
    """The exit status: :data:`EXIT_PLUGIN_FAILED` when a plugin raised (the framework logged one
    line naming the plugin, its profile and the object where known), else 0."""
    return EXIT_PLUGIN_FAILED if crashes else 0


def _cmd_run(args: argparse.Namespace) -> int:
    from desched.runtime.leader import LeaderConfig
    from desched.runtime.loop import RunOptions, default_identity, run
    from desched.runtime.tls import serving_certificate

    tls = None
    if args.secure_port and not args.http:
        tls = serving_certificate(args.tls_cert_file, args.tls_private_key_file, args.cert_dir)
    options = RunOptions(
        policy_file=args.policy_config_file,
        interval=args.descheduling_interval,
        dry_run=args.dry_run,
        kubeconfig=args.kubeconfig,
        context=args.context,
        qps=args.client_connection_qps,
        burst=args.client_connection_burst,
        leader_elect=args.leader_elect,
        leader=LeaderConfig(
            name=args.leader_elect_resource_name,
            namespace=args.leader_elect_resource_namespace,
            identity=args.leader_elect_identity or default_identity(),
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
        ),
        bind_address=args.bind_address,
        port=args.secure_port,
        tls=tls,
        disable_metrics=args.disable_metrics,
        disable_serving=args.secure_port == 0,
        event_driven=args.event_driven,
        debounce=args.event_debounce,
    )
    try:
        return run(options)
    except ValueError as e:  # leader-election timing rules
        raise UserError("--leader-elect", str(e)) from None


def _cmd_snapshot(args: argparse.Namespace) -> int:
    import asyncio

    from desched.runtime.snapshot import save_snapshot

    count = asyncio.run(save_snapshot(args.output, args.kubeconfig, args.context, events=args.events))
    print(f"wrote {count} objects to {args.output}", file=sys.stderr)
    return 0


_COMMANDS = {
    "extender": _cmd_extender,
    "run": _cmd_run,
    "simulate": _cmd_simulate,
    "snapshot": _cmd_snapshot,
    "validate": _cmd_validate,
    "version": _cmd_version,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING if args.verbosity <= 0 else logging.INFO if args.verbosity < 4 else logging.DEBUG
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    try:
        return _COMMANDS[args.command](args)
    except UserError as e:
        print(f"desched: error: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:
        return 0
    finally:
        if argv is None:
            # The process ends now: spare it the collector's last passes over everything still
            # alive (about 2 s over a 150,000-pod snapshot's records). Exit handlers still run.
            import gc

            gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
