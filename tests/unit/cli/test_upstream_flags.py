"""Upstream's ``descheduler`` flags, written where upstream's users write them, parse with their meaning.

The list below is upstream v0.36's command line, written out by hand from its sources:
cmd/descheduler/app/options/options.go (AddFlags), component-base's logsapi.AddFlags (logging),
apiserver's SecureServingOptions.AddFlags (serving) and component-base's leader-election flags.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from desched.cli import build_parser

ROOT = Path(__file__).resolve().parents[3]
POLICY = ROOT / "examples" / "policy.yaml"

#: (flag, a value as a user writes it, the attribute it lands in, the parsed value)
UPSTREAM_FLAGS: list[tuple[str, str, str, Any]] = [
    # options.go
    ("--descheduling-interval", "5m", "descheduling_interval", 300.0),
    ("--kubeconfig", "/etc/kube/config", "kubeconfig", "/etc/kube/config"),
    ("--client-connection-kubeconfig", "/etc/kube/config", "kubeconfig", "/etc/kube/config"),
    ("--client-connection-qps", "20", "client_connection_qps", 20.0),
    ("--client-connection-burst", "30", "client_connection_burst", 30),
    ("--policy-config-file", "/policy-dir/policy.yaml", "policy_config_file", "/policy-dir/policy.yaml"),
    ("--dry-run", "true", "dry_run", True),
    ("--disable-metrics", "true", "disable_metrics", True),
    ("--otel-collector-endpoint", "otel-collector:4317", "otel_collector_endpoint", "otel-collector:4317"),
    ("--otel-transport-ca-cert", "/certs/ca.pem", "otel_transport_ca_cert", "/certs/ca.pem"),
    ("--otel-service-name", "desched-prod", "otel_service_name", "desched-prod"),
    ("--otel-trace-namespace", "infra", "otel_trace_namespace", "infra"),
    ("--otel-sample-rate", "0.25", "otel_sample_rate", 0.25),
    ("--otel-fallback-no-op-on-error", "true", "otel_fallback_no_op_on_error", True),
    ("--enable-http2", "false", "enable_http2", False),
    ("--feature-gates", "EvictionsInBackground=false", "feature_gates", {"EvictionsInBackground": False}),
    # leader election (component-base BindLeaderElectionFlags)
    ("--leader-elect", "true", "leader_elect", True),
    ("--leader-elect-lease-duration", "2m17s", "leader_elect_lease_duration", 137.0),
    ("--leader-elect-renew-deadline", "1m47s", "leader_elect_renew_deadline", 107.0),
    ("--leader-elect-retry-period", "26s", "leader_elect_retry_period", 26.0),
    ("--leader-elect-resource-lock", "leases", "leader_elect_resource_lock", "leases"),
    ("--leader-elect-resource-name", "my-lock", "leader_elect_resource_name", "my-lock"),
    ("--leader-elect-resource-namespace", "infra", "leader_elect_resource_namespace", "infra"),
    # secure serving (apiserver SecureServingOptions)
    ("--bind-address", "127.0.0.1", "bind_address", "127.0.0.1"),
    ("--secure-port", "10259", "secure_port", 10259),
    ("--cert-dir", "/tmp/certs", "cert_dir", "/tmp/certs"),
    ("--tls-cert-file", "/certs/tls.crt", "tls_cert_file", "/certs/tls.crt"),
    ("--tls-private-key-file", "/certs/tls.key", "tls_private_key_file", "/certs/tls.key"),
    (
        "--tls-cipher-suites",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "tls_cipher_suites",
        ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"],
    ),
    ("--tls-min-version", "VersionTLS12", "tls_min_version", "VersionTLS12"),
    ("--tls-curve-preferences", "23,29", "tls_curve_preferences", ["23", "29"]),
    (
        "--tls-sni-cert-key",
        "foo.crt,foo.key:*.foo.com,foo.com",
        "tls_sni_cert_key",
        ["foo.crt,foo.key:*.foo.com,foo.com"],
    ),
    ("--http2-max-streams-per-connection", "100", "http2_max_streams_per_connection", 100),
    ("--permit-port-sharing", "true", "permit_port_sharing", True),
    ("--permit-address-sharing", "true", "permit_address_sharing", True),
    ("--disable-http2-serving", "true", "disable_http2_serving", True),
    # logging (component-base logsapi.AddFlags)
    ("--logging-format", "json", "logging_format", "json"),
    ("--log-flush-frequency", "1s", "log_flush_frequency", 1.0),
    ("--v", "3", "verbosity", 3),
    ("-v", "3", "verbosity", 3),
    ("--vmodule", "loop=4,node*=2", "vmodule", {"loop": 4, "node*": 2}),
    ("--log-json-split-stream", "true", "log_json_split_stream", True),
    ("--log-json-info-buffer-size", "1Ki", "log_json_info_buffer_size", 1024),
    ("--log-text-split-stream", "true", "log_text_split_stream", True),
    ("--log-text-info-buffer-size", "512", "log_text_info_buffer_size", 512),
]

#: the one flag run needs in every test below
BASE = ["run", "--policy-config-file=/p.yaml"]


def _ids(row: tuple[str, str, str, Any]) -> str:
    return row[0]


@pytest.mark.parametrize("row", UPSTREAM_FLAGS, ids=[_ids(r) for r in UPSTREAM_FLAGS])
def test_flag_parses_after_run_in_both_forms(row: tuple[str, str, str, Any]) -> None:
    flag, text, dest, expected = row
    parser = build_parser()
    if flag == "-v":
        forms = [[flag, text], [f"{flag}{text}"]]
    else:
        forms = [[f"{flag}={text}"], [flag, text]]
    for form in forms:
        args = parser.parse_args([*BASE, *form])
        assert getattr(args, dest) == expected, form


def test_every_upstream_flag_has_help_with_its_default() -> None:
    text = subprocess.run(
        [sys.executable, "-m", "desched.cli", "run", "--help"], capture_output=True, text=True, check=True
    ).stdout
    flat = " ".join(text.split())
    for flag, *_ in UPSTREAM_FLAGS:
        assert flag in text, flag
    # every option says its default (or that it is required)
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    run = sub.choices["run"]  # type: ignore[attr-defined]
    for action in run._actions:
        if action.option_strings and action.dest != "help" and action.dest != "policy_config_file":
            assert action.help and "default" in action.help, action.option_strings
    assert "(default 0)" in flat


def test_verbosity_before_the_command_is_not_clobbered() -> None:
    parser = build_parser()
    assert parser.parse_args(["--v=3", *BASE]).verbosity == 3
    assert parser.parse_args(["-v", "2", *BASE]).verbosity == 2
    assert parser.parse_args(["--logging-format=json", *BASE]).logging_format == "json"
    assert parser.parse_args([*BASE]).verbosity == 0
    assert parser.parse_args([*BASE]).logging_format == "text"
    # given both before and after, the later one wins, as a flag repeated on one command line
    assert parser.parse_args(["--v=1", *BASE, "--v=4"]).verbosity == 4
    # the other commands take them too
    assert parser.parse_args(["validate", "p.yaml", "--v=2"]).verbosity == 2
    assert parser.parse_args(["simulate", "s.yaml", "--policy", "p.yaml", "-v", "4"]).verbosity == 4


def test_feature_gates_merge_and_accept_go_booleans() -> None:
    parser = build_parser()
    args = parser.parse_args(
        [*BASE, "--feature-gates=AllAlpha=false,AllBeta=true", "--feature-gates", "EvictionsInBackground=F"]
    )
    assert args.feature_gates == {"AllAlpha": False, "AllBeta": True, "EvictionsInBackground": False}


def desched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "desched.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=60
    )


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (
            ["run", "--policy-config-file=/p.yaml", "--no-such-flag=1"],
            "unrecognized arguments: --no-such-flag=1",
        ),
        (["run", "--policy-config-file=/p.yaml", "--dry"], "unrecognized arguments: --dry"),
        (
            ["run", "--policy-config-file=/p.yaml", "--feature-gates=Nope=true"],
            "unrecognized feature gate 'Nope'",
        ),
        (
            ["run", "--policy-config-file=/p.yaml", "--feature-gates=EvictionsInBackground"],
            "expected key=true|false",
        ),
        (
            ["run", "--policy-config-file=/p.yaml", "--feature-gates=AllBeta=maybe"],
            "AllBeta: must be true or false",
        ),
        (["run", "--policy-config-file=/p.yaml", "--logging-format=xml"], "--logging-format: invalid choice"),
        (["run", "--policy-config-file=/p.yaml", "--v=-1"], "must not be negative"),
        (["run", "--policy-config-file=/p.yaml", "--vmodule=loop"], "expected pattern=N"),
        (["run", "--policy-config-file=/p.yaml", "--tls-min-version=VersionTLS9"], "--tls-min-version"),
        (
            ["run", "--policy-config-file=/p.yaml", "--safety-state-configmap=a/b/c"],
            "--safety-state-configmap: must be NAME or NAMESPACE/NAME of a ConfigMap, got 'a/b/c'",
        ),
        (["run", "--policy-config-file=/p.yaml", "--safety-state-configmap=Big_Name"], "got 'Big_Name'"),
    ],
)
def test_bad_flags_are_one_line_exit_2(argv: list[str], needle: str) -> None:
    proc = desched(*argv)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0], lines[0]


def test_shipped_manifest_args_parse() -> None:
    """The args every shipped manifest renders (kustomize Job/CronJob/Deployment, Helm defaults)."""
    parser = build_parser()
    args = parser.parse_args(
        ["run", "--policy-config-file=/policy-dir/policy.yaml", "--cert-dir=/tmp/certs", "--v=3"]
    )
    assert (args.policy_config_file, args.cert_dir, args.verbosity) == (
        "/policy-dir/policy.yaml",
        "/tmp/certs",
        3,
    )
    args = parser.parse_args(
        [
            "run",
            "--policy-config-file",
            "/policy-dir/policy.yaml",
            "--descheduling-interval",
            "5m",
            "--v",
            "3",
        ]
    )
    assert (args.descheduling_interval, args.verbosity) == (300.0, 3)
