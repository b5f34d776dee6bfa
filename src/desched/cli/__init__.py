"""The ``desched`` command: run | simulate | extender | snapshot | validate | version.

Bad input ends in one line on stderr naming the field and the reason, and exit code 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn

import msgspec
import yaml

from desched.cli.values import (
    GO_BOOL,
    MergeGates,
    byte_quantity,
    duration,
    feature_gates,
    positive_duration,
    sample_rate,
    string_list,
    verbosity,
    vmodule,
)
from desched.errors import UserError

log = logging.getLogger("desched")


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # as pflag: a flag is spelled out in full
        super().__init__(*args, **kwargs)

    #: the --logging-format of the command line being parsed (main sets it): how errors are told
    fatal_format = "text"

    def error(self, message: str) -> NoReturn:  # argparse exits 2 too; keep it to one line
        fatal(message, _Parser.fatal_format)
        self.exit(2)


def parse_now(text: str) -> datetime:
    try:
        value = msgspec.convert(text, datetime)
    except msgspec.ValidationError:
        raise UserError(
            "--now", f"must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got {text!r}"
        ) from None
    if value.tzinfo is None:
        raise UserError("--now", f"must carry a time zone (e.g. a trailing Z), got {text!r}")
    return value.astimezone(UTC)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="desched", description="A Kubernetes descheduler.")
    _add_logging_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")

    sim = sub.add_parser(
        "simulate", help="run one descheduling cycle on a cluster snapshot, evicting nothing"
    )
    sim.add_argument("snapshot", help="cluster snapshot: a v1 List (JSON or YAML) or multi-document YAML")
    sim.add_argument(
        "--policy",
        "--policy-config-file",
        dest="policy",
        required=True,
        help="DeschedulerPolicy file (descheduler/v1alpha2 or v1alpha1); --policy-config-file as run",
    )
    sim.add_argument("--now", help="the clock for age-based decisions, RFC 3339 (default: the current time)")
    sim.add_argument(
        "--output",
        "-o",
        choices=["table", "wide", "json", "yaml"],
        default="table",
        help="table: a summary, the first rows of each list; wide: every row, nothing cut; "
        "json: everything, for scripts; yaml: the same document as json (default table)",
    )
    sim.add_argument(
        "--namespace",
        action="append",
        default=[],
        metavar="NS",
        help="show only this namespace's pods (the simulation still covers the whole cluster); "
        "repeatable (default: every namespace)",
    )
    sim.add_argument(
        "--explain",
        action="append",
        default=[],
        metavar="NS/NAME",
        help="tell what each profile and plugin decided about this pod, and why; repeatable "
        "(-o json: under the key 'explain')",
    )
    sim.add_argument(
        "--explain-all",
        action="store_true",
        help="with -o json, list under each plugin of summary.plugins every candidate it "
        "considered, with its verdict and reason; with the table, print them (default off)",
    )
    _add_placement_arguments(sim)

    val = sub.add_parser("validate", help="check a policy file and print it normalised (defaults filled in)")
    val.add_argument("policy", help="DeschedulerPolicy file (descheduler/v1alpha2 or v1alpha1)")
    val.add_argument(
        "--output",
        "-o",
        choices=["yaml", "json"],
        default="yaml",
        help="the normalised policy's format (default yaml)",
    )

    ver = sub.add_parser("version", help="print the version, git commit, build date, Python and platform")
    ver.add_argument(
        "--output", "-o", choices=["text", "json"], default="text", help="one line, or JSON (default text)"
    )
    comp = sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)")
    comp.add_argument(
        "shell",
        choices=["bash", "zsh", "fish"],
        help="bash: source <(desched completion bash); zsh: the same with zsh; "
        "fish: desched completion fish | source",
    )
    _add_run_parser(sub)

    _add_extender_parser(sub)

    snap = sub.add_parser("snapshot", help="save a live cluster as a snapshot file that simulate reads")
    snap.add_argument("-o", "--output", required=True, help="file to write (JSON v1 List)")
    snap.add_argument(
        "--kubeconfig",
        "--client-connection-kubeconfig",
        dest="kubeconfig",
        help="kubeconfig file (default: $KUBECONFIG, in-cluster, then ~/.kube/config, as desched run)",
    )
    snap.add_argument("--context", help="kubeconfig context (default: the current one)")
    snap.add_argument("--events", action="store_true", help="include core/v1 Events")
    snap.add_argument(
        "--workloads",
        action="store_true",
        help="include Services, ReplicaSets, StatefulSets and ReplicationControllers (the selectors "
        "of kube-scheduler's default spread constraints) and Deployments (evictionPolicy.surge)",
    )
    for subparser in sub.choices.values():
        # upstream's users write the logging flags after the command too (--v=3 after run)
        _add_logging_options(subparser, top=False)
    _add_connection_timeout(snap)
    return parser


def _add_connection_timeout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--client-connection-timeout",
        type=positive_duration,
        default=30.0,
        metavar="DURATION",
        help="give up starting (exit 2, one line naming the cause) when the API server has not "
        "answered usefully for this long, e.g. 10s; 401/403 end at once (default 30s; not an "
        "upstream flag)",
    )


def _add_logging_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """Kubernetes components' logging flags (component-base ``logsapi.AddFlags``), accepted before or
    after the command. After the command their defaults are suppressed, so a value given before the
    command is not overwritten by the subcommand's default."""

    def default(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    group = parser.add_argument_group("logging (as Kubernetes components)")
    group.add_argument(
        "-v",
        "--v",
        dest="verbosity",
        type=verbosity,
        default=default(0),
        metavar="N",
        help="log verbosity: 0 decisions and cycle summaries, 2 more about each cycle, 4 every "
        "candidate a plugin considered and why it was left (default 0)",
    )
    group.add_argument(
        "--logging-format",
        choices=["text", "json"],
        default=default("text"),
        help="log format: klog-like text with key=value fields, or one JSON object per line (default text)",
    )
    group.add_argument(
        "--vmodule",
        type=vmodule,
        default=default({}),
        metavar="PATTERN=N,...",
        help="per-module verbosity: a glob over desched's module names (e.g. loop=4,node*=3), "
        "as klog's per-file patterns (default none)",
    )
    group.add_argument(
        "--log-flush-frequency",
        type=duration,
        default=default(5.0),
        metavar="DURATION",
        help="accepted for compatibility; desched writes every line at once, so there is nothing "
        "to flush (default 5s)",
    )
    for fmt in ("json", "text"):
        group.add_argument(
            f"--log-{fmt}-split-stream",
            **GO_BOOL,
            default=default(False),
            help=f"with --logging-format={fmt}: info lines to stdout, errors and warnings to stderr "
            "(default false: everything to stderr)",
        )
        group.add_argument(
            f"--log-{fmt}-info-buffer-size",
            type=byte_quantity,
            default=default(0),
            metavar="QUANTITY",
            help="accepted for compatibility; desched does not buffer log lines (default 0)",
        )


def _add_upstream_serving_and_tracing(run: argparse.ArgumentParser) -> None:
    """The rest of upstream's ``descheduler`` flags: feature gates, tracing, TLS and HTTP/2."""
    run.add_argument(
        "--feature-gates",
        type=feature_gates,
        action=MergeGates,
        default={},
        metavar="KEY=BOOL,...",
        help="alpha/experimental features as upstream: AllAlpha, AllBeta, EvictionsInBackground "
        "(ALPHA: evictions that go on in background, for KubeVirt, as upstream) (default none)",
    )
    otel = run.add_argument_group("tracing (OpenTelemetry, as upstream)")
    otel.add_argument(
        "--otel-collector-endpoint",
        default="",
        metavar="HOST:PORT|URL",
        help="send traces over OTLP: host:port is OTLP/gRPC as upstream; an http(s):// URL is "
        "OTLP/HTTP (protobuf) to URL/v1/traces (default empty: no tracing)",
    )
    otel.add_argument(
        "--otel-transport-ca-cert",
        default="",
        metavar="FILE",
        help="CA certificate for a TLS connection to the collector; without it gRPC is plain text "
        "(default empty)",
    )
    otel.add_argument(
        "--otel-service-name", default="descheduler", help="service.name of the traces (default descheduler)"
    )
    otel.add_argument(
        "--otel-trace-namespace", default="", help="service.namespace of the traces (default empty)"
    )
    otel.add_argument(
        "--otel-sample-rate",
        type=sample_rate,
        default=1.0,
        metavar="RATE",
        help="fraction of cycles traced, parent-based trace-ID ratio (default 1)",
    )
    otel.add_argument(
        "--otel-fallback-no-op-on-error",
        **GO_BOOL,
        default=False,
        help="if tracing cannot be set up, run without it instead of failing (default false)",
    )
    tls = run.add_argument_group("serving (as upstream's secure serving)")
    tls.add_argument(
        "--tls-min-version",
        default="",
        choices=["", "VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13"],
        metavar="VERSION",
        help="minimum TLS version served: VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13 "
        "(default empty: TLS 1.2, Go's default)",
    )
    tls.add_argument(
        "--tls-cipher-suites",
        type=string_list,
        default=[],
        metavar="SUITE,...",
        help="comma-separated cipher suites by their IANA names (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, "
        "...); TLS 1.3 suites are always on (default empty: the TLS library's defaults)",
    )
    tls.add_argument(
        "--tls-curve-preferences",
        type=string_list,
        default=[],
        metavar="CURVE,...",
        help="key-exchange curves as upstream's Go tls.CurveID numbers (23 P-256, 24 P-384, 25 P-521, "
        "29 X25519, 4588 X25519MLKEM768) or Go's names; checked always, applied only where Python's "
        "ssl has SSLContext.set_groups (not 3.11: a warning says so) (default empty: the TLS "
        "library's defaults)",
    )
    tls.add_argument(
        "--tls-sni-cert-key",
        action="append",
        default=[],
        metavar="CERT,KEY[:NAME,...]",
        help="an extra certificate and key served to clients asking for NAME (SNI); without names, "
        "the certificate's own names; repeatable (default none)",
    )
    tls.add_argument(
        "--permit-port-sharing",
        **GO_BOOL,
        default=False,
        help="bind the port with SO_REUSEPORT, so several processes can share it (default false)",
    )
    tls.add_argument(
        "--permit-address-sharing",
        **GO_BOOL,
        default=False,
        help="bind with SO_REUSEADDR (desched always does) (default false)",
    )
    for flag, what in (
        ("--enable-http2", "serve HTTP/2"),
        ("--disable-http2-serving", "never serve HTTP/2"),
    ):
        tls.add_argument(
            flag,
            **GO_BOOL,
            default=False,
            help=f"accepted for compatibility ({what}); desched serves HTTP/1.1 only (default false)",
        )
    tls.add_argument(
        "--http2-max-streams-per-connection",
        type=int,
        default=0,
        metavar="N",
        help="accepted for compatibility; desched serves HTTP/1.1 only (default 0)",
    )


def _add_run_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="deschedule a live cluster (upstream-compatible flags)")
    run.add_argument(
        "--policy-config-file",
        "--policy",
        dest="policy_config_file",
        required=True,
        help="DeschedulerPolicy file (required; no default); --policy as simulate",
    )
    run.add_argument(
        "--descheduling-interval",
        type=duration,
        default=None,
        help="time between cycles, e.g. 5m; 0 runs one cycle and exits (default 0)",
    )
    run.add_argument(
        "--descheduling-interval-cron-expression",
        metavar="CRON",
        help="run cycles at these times instead, e.g. '0 2 * * *' (Volcano's flag; five fields, "
        "@daily/@hourly/..., '@every 6h', an optional 'CRON_TZ=Area/City ' prefix); not with "
        "--descheduling-interval (default none: cycles every --descheduling-interval)",
    )
    run.add_argument(
        "--descheduling-interval-cron-time-zone",
        metavar="ZONE",
        help="time zone of the cron expression, e.g. Europe/Paris (default: $TZ, else the "
        "machine's local time, else UTC)",
    )
    run.add_argument(
        "--dry-run",
        **GO_BOOL,
        default=False,
        help="evict nothing; report what would be evicted (default false)",
    )
    run.add_argument(
        "--kubeconfig",
        "--client-connection-kubeconfig",
        dest="kubeconfig",
        help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)",
    )
    run.add_argument("--context", help="kubeconfig context (default: the current one)")
    run.add_argument(
        "--client-connection-qps",
        type=float,
        default=0.0,
        help="API requests per second; 0 is client-go's default, 5 (negative: no limit) (default 0)",
    )
    run.add_argument(
        "--client-connection-burst",
        type=int,
        default=0,
        help="API request burst; 0 is client-go's default, 10 (default 0)",
    )
    _add_connection_timeout(run)
    run.add_argument(
        "--leader-elect",
        **GO_BOOL,
        default=False,
        help="take a Lease before running cycles, for several replicas (default false)",
    )
    for flag, seconds, text, what in (
        ("--leader-elect-lease-duration", 137.0, "2m17s", "how long a lost leader keeps the Lease"),
        ("--leader-elect-renew-deadline", 107.0, "1m47s", "how long the leader tries to renew"),
        ("--leader-elect-retry-period", 26.0, "26s", "time between attempts"),
    ):
        run.add_argument(
            flag, type=duration, default=seconds, metavar="DURATION", help=f"{what} (default {text})"
        )
    run.add_argument(
        "--leader-elect-resource-lock",
        default="leases",
        choices=["leases"],
        help="the lock's kind (default leases)",
    )
    run.add_argument(
        "--leader-elect-resource-name", default="descheduler", help="the Lease's name (default descheduler)"
    )
    run.add_argument(
        "--leader-elect-resource-namespace",
        default="kube-system",
        help="the Lease's namespace (default kube-system)",
    )
    run.add_argument(
        "--leader-elect-identity", default="", help="this replica's name in the Lease (default: hostname_pid)"
    )
    run.add_argument(
        "--safety-state-configmap",
        type=_state_configmap,
        default="desched-safety-state",
        metavar="[NAMESPACE/]NAME",
        help="where the evictionPolicy's cooldowns, rate limits and awaited replacements are kept "
        "across restarts (only with those rules on); the namespace defaults to $POD_NAMESPACE, the "
        "ServiceAccount's, else --leader-elect-resource-namespace (default desched-safety-state)",
    )
    run.add_argument(
        "--secure-port",
        type=int,
        default=10258,
        help="port for /metrics, /healthz, /readyz; 0: serve nothing (default 10258)",
    )
    run.add_argument("--bind-address", default="0.0.0.0", help="address to serve on (default 0.0.0.0)")
    run.add_argument("--tls-cert-file", default="", help="serving certificate (default: a self-signed one)")
    run.add_argument(
        "--tls-private-key-file", default="", help="its private key (default: the self-signed one's)"
    )
    run.add_argument(
        "--cert-dir",
        default="",
        help="where the self-signed certificate is written if none is given (default: a new "
        "temporary directory)",
    )
    run.add_argument(
        "--http",
        action="store_true",
        help="serve plain HTTP instead of HTTPS, for local use (default off)",
    )
    run.add_argument(
        "--disable-metrics",
        **GO_BOOL,
        default=False,
        help="do not serve /metrics (default false)",
    )
    run.add_argument(
        "--event-driven",
        action="store_true",
        help="also run a cycle soon after relevant cluster changes (nodes added, tainted, "
        "relabelled; pods failing) (default off)",
    )
    run.add_argument(
        "--event-debounce",
        type=duration,
        default=5.0,
        help="a change within this long of the one before is part of a burst, whose early cycle "
        "waits this long; a change after a quiet period runs it at once (default 5s)",
    )
    run.add_argument(
        "--reload-policy",
        **GO_BOOL,
        default=True,
        help="read the policy file again before each cycle and on SIGHUP; a changed one takes over "
        "between two cycles, a broken one leaves the running one in place (default true)",
    )
    run.add_argument(
        "--settling-window",
        type=duration,
        default=40.0,
        help="after a re-list, a watch gap or an apiserver restart, or while more than a tenth of the "
        "nodes changed readiness, pods whose readiness changed within this long are not evicted "
        "(skip reason settling); 0s: off (default 40s: a node lease, four node heartbeats)",
    )
    _add_upstream_serving_and_tracing(run)


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
    ext.add_argument("--bind-address", default="0.0.0.0", help="address to serve on (default 0.0.0.0)")
    ext.add_argument(
        "--kubeconfig",
        "--client-connection-kubeconfig",
        dest="kubeconfig",
        help="kubeconfig for the node and pod cache (default: as desched run)",
    )
    ext.add_argument("--context", help="kubeconfig context (default: the current one)")
    ext.add_argument("--snapshot", help="serve from a cluster snapshot file instead of a live cluster")
    _add_connection_timeout(ext)
    ext.add_argument("--tls-cert-file", default="", help="serve HTTPS with this certificate (and key)")
    ext.add_argument(
        "--tls-private-key-file", default="", help="the private key of --tls-cert-file (default none: HTTP)"
    )
    ext.add_argument(
        "--timeout-budget",
        type=duration,
        default=4.0,
        help="answer within this time, with what is computed so far (default 4s; "
        "kube-scheduler's httpTimeout defaults to 5s)",
    )


def _cmd_extender(args: argparse.Namespace) -> int:
    from desched.app.extender import ExtenderOptions, run_extender
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
            connect_timeout=args.client_connection_timeout,
        )
    )


def _cmd_version(args: argparse.Namespace) -> int:
    from desched.cli.version import render

    print(render(args.output))
    return 0


def _cmd_completion(args: argparse.Namespace) -> int:
    from desched.cli.completion import script

    sys.stdout.write(script(build_parser(), args.shell))
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from desched.app.validate import normalised_policy

    doc = normalised_policy(args.policy)
    if args.output == "json":
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
    return 0  # loading the policy logged its warnings (policy.warnings), once each


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
        "--placement-order",
        choices=["interleaved", "after-cycle"],
        default="interleaved",
        help="place each replacement as its pod is evicted, as kube-scheduler does while the "
        "cycle is still evicting, or all after the cycle, higher priority first "
        "(default: interleaved)",
    )
    sim.add_argument(
        "--terminating-pods",
        choices=["hold", "gone"],
        default="hold",
        help="an evicted pod keeps its node's resources while its replacements are placed "
        "(a kubelet's graceful termination), or is gone at once (kwok) (default: hold)",
    )
    sim.add_argument(
        "--kube-scheduler-config",
        metavar="FILE",
        help="the cluster's KubeSchedulerConfiguration: replacements are placed with the default "
        "spread constraints its default-scheduler profile sets for PodTopologySpread and its "
        "percentageOfNodesToScore (default: kube-scheduler's built-in system defaults)",
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
        metavar="FILE.html|DIR",
        help="write the HTML report, one self-contained file (charts inlined), to FILE.html, or to "
        "DIR/index.html for a path not ending in .html; needs the 'report' extra",
    )
    sim.add_argument(
        "--webhook",
        action="store_true",
        help="ask each profile's evictionPolicy.webhook (with dryRun true) before each eviction, as "
        "run does: its denials are listed as skips (webhook_denied); off by default, simulate "
        "then contacts nothing",
    )


def _cmd_simulate(args: argparse.Namespace) -> int:
    from desched.app.simulate import SimulateRequest, run_simulate

    request = SimulateRequest(
        snapshot=args.snapshot,
        policy=args.policy,
        now=parse_now(args.now) if args.now is not None else datetime.now(UTC),
        output=args.output,
        namespaces=tuple(args.namespace),
        cycles=args.cycles,
        placement=args.placement,
        score=args.score,
        scorer_config=args.scorer_config,
        placement_order=args.placement_order,
        terminating_pods=args.terminating_pods,
        kube_scheduler_config=args.kube_scheduler_config,
        explain=tuple(args.explain),
        explain_all=args.explain_all,
        report=args.report,
        webhook=args.webhook,
    )
    if args.output != "yaml":
        return run_simulate(request)
    # -o yaml: the document -o json writes, as YAML
    import io

    buffer = io.StringIO()
    request = dataclasses.replace(request, output="json")
    code = run_simulate(request, buffer)
    sys.stdout.write(yaml.safe_dump(json.loads(buffer.getvalue()), sort_keys=False, allow_unicode=True))
    return code


_DNS_NAME = re.compile(r"[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?")


def _state_configmap(value: str) -> str:
    """``[NAMESPACE/]NAME`` of a ConfigMap (--safety-state-configmap)."""
    parts = value.split("/")
    if len(parts) > 2 or not all(_DNS_NAME.fullmatch(p) for p in parts):
        raise argparse.ArgumentTypeError(f"must be NAME or NAMESPACE/NAME of a ConfigMap, got {value!r}")
    return value


def _cmd_run(args: argparse.Namespace) -> int:
    from desched.app.process import CronSpec, ServingTLS, TracingOptions
    from desched.app.run import RunOptions, default_identity, run
    from desched.runtime.leader import LeaderConfig

    gates = args.feature_gates
    in_background = bool(gates.get("EvictionsInBackground", gates.get("AllAlpha", False)))
    tracing = None
    if args.otel_collector_endpoint:
        tracing = TracingOptions(
            endpoint=args.otel_collector_endpoint,
            ca_cert=args.otel_transport_ca_cert,
            service_name=args.otel_service_name,
            service_namespace=args.otel_trace_namespace,
            sample_rate=args.otel_sample_rate,
            fallback_no_op_on_error=args.otel_fallback_no_op_on_error,
        )
    cron = None
    if args.descheduling_interval_cron_expression is not None:
        if args.descheduling_interval is not None:
            raise UserError(
                "--descheduling-interval-cron-expression",
                "cannot be given with --descheduling-interval (got "
                f"{args.descheduling_interval_cron_expression!r} and an interval); keep one",
            )
        cron = CronSpec(args.descheduling_interval_cron_expression, args.descheduling_interval_cron_time_zone)
    elif args.descheduling_interval_cron_time_zone is not None:
        raise UserError(
            "--descheduling-interval-cron-time-zone",
            "needs --descheduling-interval-cron-expression "
            f"(got {args.descheduling_interval_cron_time_zone!r})",
        )
    options = RunOptions(
        policy_file=args.policy_config_file,
        interval=args.descheduling_interval or 0.0,
        cron=cron,
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
        tls=ServingTLS(
            cert_file=args.tls_cert_file,
            key_file=args.tls_private_key_file,
            cert_dir=args.cert_dir,
            min_version=args.tls_min_version,
            cipher_suites=tuple(args.tls_cipher_suites),
            sni_cert_keys=tuple(args.tls_sni_cert_key),
            curve_preferences=tuple(args.tls_curve_preferences),
            secure=bool(args.secure_port) and not args.http,
        ),
        reuse_port=args.permit_port_sharing,
        disable_metrics=args.disable_metrics,
        disable_serving=args.secure_port == 0,
        event_driven=args.event_driven,
        debounce=args.event_debounce,
        settling_window=args.settling_window,
        reload_policy=args.reload_policy,
        tracing=tracing,
        connect_timeout=args.client_connection_timeout,
        evictions_in_background=in_background,
        safety_state=args.safety_state_configmap,
    )
    try:
        return run(options)
    except ValueError as e:  # leader-election timing rules
        raise UserError("--leader-elect", str(e)) from None


def _cmd_snapshot(args: argparse.Namespace) -> int:
    from desched.app.snapshot import take_snapshot

    count = take_snapshot(
        args.output,
        args.kubeconfig,
        args.context,
        events=args.events,
        workloads=args.workloads,
        connect_timeout=args.client_connection_timeout,
    )
    print(f"wrote {count} objects to {args.output}", file=sys.stderr)
    return 0


_COMMANDS = {
    "completion": _cmd_completion,
    "extender": _cmd_extender,
    "run": _cmd_run,
    "simulate": _cmd_simulate,
    "snapshot": _cmd_snapshot,
    "validate": _cmd_validate,
    "version": _cmd_version,
}


def normalise_flag_names(argv: Sequence[str]) -> list[str]:
    """Upstream's flag names are normalised as pflag's ``WordSepNormalizeFunc`` does (component-base
    cli/flag, set on the descheduler's flag set): ``_`` in a flag's name is ``-``, so
    ``--dry_run`` is ``--dry-run``. Only the name before ``=`` changes, and nothing after ``--``."""
    out: list[str] = []
    rest = False
    for token in argv:
        if rest or not token.startswith("--") or token == "--":
            rest = rest or token == "--"
            out.append(token)
            continue
        name, sep, value = token.partition("=")
        out.append(name.replace("_", "-") + sep + value)
    return out


def _logging_format_in(argv: Sequence[str]) -> str:
    """The --logging-format the command line asks for (its last one), read before parsing so even
    an option argparse refuses is told in that format."""
    fmt = "text"
    for i, token in enumerate(argv):
        if token == "--logging-format" and i + 1 < len(argv):
            fmt = argv[i + 1]
        elif token.startswith("--logging-format="):
            fmt = token.partition("=")[2]
    return fmt if fmt in ("text", "json") else "text"


def fatal(message: str, fmt: str, *, exit_code: int = 2, option: str = "") -> None:
    """The one line that says why desched stops: ``desched: error: ...`` on stderr, or with
    ``--logging-format=json`` one JSON log line (level error) a log pipeline keeps."""
    if fmt != "json":
        print(f"desched: error: {message}", file=sys.stderr)
        return
    from desched.logs import JsonFormatter

    record = logging.LogRecord("desched", logging.ERROR, __file__, 0, message, (), None)
    record.exitCode = exit_code
    if option:
        record.option = option
    print(JsonFormatter().format(record), file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    raw = normalise_flag_names(sys.argv[1:] if argv is None else argv)
    fmt = _logging_format_in(raw)
    parser = build_parser()
    _Parser.fatal_format = fmt
    if not raw:  # bare `desched`: what it can do, and exit 2 as for any missing argument
        parser.print_help(sys.stderr)
        return 2
    args = parser.parse_args(raw)
    from desched import logs
    from desched.cli import flags

    try:
        flags.validate(parser, args, raw)  # every option, before any file or cluster is touched
    except UserError as e:
        fatal(str(e), fmt, exit_code=e.exit_code, option=e.path if e.path.startswith("-") else "")
        return e.exit_code
    fmt = args.logging_format
    split = args.log_json_split_stream if fmt == "json" else args.log_text_split_stream
    logs.configure(args.verbosity, fmt, args.vmodule, split_stream=split)
    try:
        return _COMMANDS[args.command](args)
    except UserError as e:
        fatal(str(e), fmt, exit_code=e.exit_code, option=e.path if e.path.startswith("-") else "")
        return e.exit_code
    except BrokenPipeError:
        return 0
    finally:
        if argv is None:
            # The process ends now: spare it the collector's last passes over everything still
            # alive (seconds on a large snapshot: docs/performance.md). Exit handlers still run.
            import gc

            gc.freeze()
