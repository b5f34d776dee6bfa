"""Every option of every command is in desched.cli.flags' table, and is checked before any I/O.

A bad value is one line naming the option and the value, exit code 2, at once: the kubeconfig
below points at a closed port, so a check that came after connecting would first spend the 30 s
of --client-connection-timeout (and say the server is unreachable instead).
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from desched import cli
from desched.cli import build_parser, flags, values

ROOT = Path(__file__).resolve().parents[3]
POLICY = ROOT / "examples" / "policy.yaml"
CLUSTER = ROOT / "examples" / "cluster.yaml"

#: the argparse converter each kind of option is parsed with (None: argparse's own, a string or a flag)
KIND_TYPES: dict[str, set[object]] = {
    "bool": {None, values.go_bool},
    "int": {int, values.verbosity},
    "port": {int},
    "float": {float, values.sample_rate},
    "duration": {values.duration, values.positive_duration},
    "quantity": {values.byte_quantity},
    "map": {values.vmodule, values.feature_gates},
    "list": {None, values.string_list},
    "name": {None, cli._state_configmap},
}


def _all_actions() -> Iterator[tuple[str, argparse.Action]]:
    parser = build_parser()
    for action in parser._actions:
        yield "", action
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command, child in sub.choices.items():
        for action in child._actions:
            yield command, action


def test_every_option_of_every_command_is_in_the_table() -> None:
    missing, wrong_type = [], []
    for command, action in _all_actions():
        rule = flags.rule_for(command, action.dest)
        name = f"{command or 'desched'} {flags.option_name(action)}"
        if rule is None:
            missing.append(name)
            continue
        assert rule.kind in flags.KINDS, name
        allowed = KIND_TYPES.get(rule.kind, {None})
        if action.type not in allowed:
            wrong_type.append(f"{name}: kind {rule.kind}, parsed with {action.type}")
    assert not missing, f"options with no entry in desched.cli.flags.FLAGS: {missing}"
    assert not wrong_type, wrong_type


def test_the_table_names_no_option_that_does_not_exist() -> None:
    present = {(c, a.dest) for c, a in _all_actions()}
    dests = {d for _, d in present}
    for command, dest in flags.FLAGS:
        if command == "*":
            assert dest in dests, dest
        else:
            assert (command, dest) in present, (command, dest)
    for rel in flags.RELATIONS:
        for dest in (*rel.flags, *((rel.when,) if rel.when else ())):
            assert (rel.command, dest) in present, (rel, dest)


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    path = tmp_path_factory.mktemp("kc") / "config"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return path


def desched(*args: str, timeout: float = 60) -> tuple[int, str, str, float]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "desched.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started


RUN_CASES: list[tuple[list[str], str]] = [
    (["--secure-port", "99999"], "--secure-port: must be between 0 and 65535, got 99999"),
    (["--secure-port=-1"], "--secure-port: must be between 0 and 65535, got -1"),
    (["--client-connection-qps", "nan"], "--client-connection-qps: must be a number, got nan"),
    (
        ["--client-connection-burst", "-3"],
        "--client-connection-burst: must be between 0 and 2147483647, got -3",
    ),
    (
        ["--tls-cert-file", "/no/such.crt", "--tls-private-key-file", "/no/such.key"],
        "--tls-cert-file: file '/no/such.crt' does not exist",
    ),
    (["--tls-cert-file", str(POLICY)], "--tls-cert-file: needs --tls-private-key-file too"),
    (
        [
            "--leader-elect",
            "--descheduling-interval=1m",
            "--leader-elect-renew-deadline=5s",
            "--leader-elect-lease-duration=1s",
        ],
        "--leader-elect-renew-deadline: must be shorter than --leader-elect-lease-duration",
    ),
    (
        ["--leader-elect", "--descheduling-interval=1m", "--leader-elect-retry-period=2m"],
        "--leader-elect-retry-period: must be shorter than --leader-elect-renew-deadline",
    ),
    (
        ["--leader-elect"],
        "--leader-elect: needs --descheduling-interval > 0 or --descheduling-interval-cron-expression "
        "(a one-shot run has nothing to lead)",
    ),
    (["--leader-elect", "--descheduling-interval=0s"], "--leader-elect: needs --descheduling-interval > 0"),
    (
        ["--descheduling-interval", ""],
        "--descheduling-interval: must be a duration such as 30s or 5m, got ''",
    ),
    (["--event-debounce="], "--event-debounce: must be a duration"),
    (["--leader-elect-lease-duration=0s"], "--leader-elect-lease-duration: must be more than 0, got 0"),
    (["--otel-sample-rate=nan"], "--otel-sample-rate: must be a number, got nan"),
    (["--otel-transport-ca-cert=/no/ca.pem"], "--otel-transport-ca-cert: file '/no/ca.pem' does not exist"),
    (["--http2-max-streams-per-connection=-1"], "--http2-max-streams-per-connection: must be between"),
    (["--bind-address=no.such.host.invalid"], "--bind-address: cannot listen on 'no.such.host.invalid'"),
    (
        ["--descheduling-interval=5m", "--descheduling-interval-cron-expression=@daily"],
        "--descheduling-interval-cron-expression: cannot be given with --descheduling-interval",
    ),
    (["--descheduling-interval-cron-expression=61 * * * *"], "--descheduling-interval-cron-expression"),
    (
        [
            "--descheduling-interval-cron-expression=@daily",
            "--descheduling-interval-cron-time-zone=Mars/Olympus",
        ],
        "--descheduling-interval-cron-time-zone: unknown time zone 'Mars/Olympus'",
    ),
    (["--kubeconfig=/no/kubeconfig"], "--kubeconfig: file '/no/kubeconfig' does not exist"),
    (["--cert-dir", str(POLICY)], "--cert-dir: "),
]


@pytest.mark.parametrize(("extra", "needle"), RUN_CASES, ids=[" ".join(c[0])[:60] for c in RUN_CASES])
def test_bad_run_flag_is_one_line_exit_2_before_connecting(
    kubeconfig: Path, extra: list[str], needle: str
) -> None:
    args = ["run", f"--policy-config-file={POLICY}", f"--kubeconfig={kubeconfig}", *extra]
    code, _, err, took = desched(*args)
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("desched: error: ") and needle in err, err
    assert took < 15, f"{took:.1f}s: checked after trying to connect?"


def test_a_port_in_use_is_one_line_exit_2_before_connecting(kubeconfig: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        code, _, err, took = desched(
            "run",
            f"--policy-config-file={POLICY}",
            f"--kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
        )
    assert code == 2, err
    assert err == f"desched: error: --secure-port: port {port} on '127.0.0.1' is already in use\n"
    assert took < 15


def test_extender_port_checked_before_reading_or_serving(tmp_path: Path) -> None:
    code, _, err, _ = desched("extender", "--config", str(POLICY), "--port", "70000")
    assert (code, err) == (2, "desched: error: --port: must be between 1 and 65535, got 70000\n")


def test_snapshot_into_an_unwritable_folder_is_told_at_once(kubeconfig: Path, tmp_path: Path) -> None:
    code, _, err, took = desched("snapshot", "-o", "/no/such/folder/s.json", f"--kubeconfig={kubeconfig}")
    assert code == 2, err
    assert err == (
        "desched: error: --output: cannot write '/no/such/folder/s.json': "
        "folder '/no/such/folder' does not exist\n"
    )
    assert took < 15
    code, _, err, _ = desched("snapshot", "-o", str(tmp_path), f"--kubeconfig={kubeconfig}")
    assert (code, err) == (2, f"desched: error: --output: '{tmp_path}' is a directory; give a file name\n")


def test_snapshot_against_a_server_that_never_answers_names_it_and_the_bound(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)  # accepts (the kernel does), never answers
        port = server.getsockname()[1]
        kc = tmp_path / "kc"
        kc.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
            "users: [{name: u, user: {token: t}}]\n"
            "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        )
        code, _, err, took = desched(
            "snapshot", "-o", str(tmp_path / "s.json"), f"--kubeconfig={kc}", "--client-connection-timeout=2s"
        )
    assert code == 2, err
    assert err == (
        f"desched: error: no answer from the API server at https://127.0.0.1:{port} within 2s "
        "(it accepts connections but does not respond; --client-connection-timeout)\n"
    )
    assert took < 12
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize(
    ("now", "needle"),
    [("", "--now: must be an RFC 3339 time, got ''"), ("yesterday", "--now: must be an RFC 3339 time")],
)
def test_simulate_now_empty_is_an_error_not_the_wall_clock(now: str, needle: str) -> None:
    code, out, err, _ = desched("simulate", str(CLUSTER), "--policy", str(POLICY), "--now", now)
    assert code == 2 and out == "", err
    assert err.count("\n") == 1 and needle in err, err


def test_fatal_line_follows_logging_format_json(kubeconfig: Path) -> None:
    code, _, err, _ = desched(
        "--logging-format=json", "run", f"--policy-config-file={POLICY}", "--secure-port=99999"
    )
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1, err
    doc = json.loads(lines[0])
    assert doc["level"] == "error"
    assert doc["msg"] == "--secure-port: must be between 0 and 65535, got 99999"
    assert doc["option"] == "--secure-port" and doc["exitCode"] == 2


def test_fatal_line_follows_logging_format_json_for_argparse_and_late_errors(tmp_path: Path) -> None:
    # an option argparse refuses (told before logging is set up), after the command too
    code, _, err, _ = desched("run", f"--policy-config-file={POLICY}", "--logging-format", "json", "--nope")
    assert code == 2
    assert json.loads(err)["msg"] == "unrecognized arguments: --nope"
    # an error a command finds (a policy that does not load)
    bad = tmp_path / "p.yaml"
    bad.write_text("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: 3\n")
    code, _, err, _ = desched("validate", str(bad), "--logging-format=json")
    assert code == 2
    doc = json.loads(err.splitlines()[-1])
    assert doc["level"] == "error" and "profiles" in doc["msg"]
    # text stays as it was
    code, _, err, _ = desched("validate", str(bad))
    assert code == 2 and err.splitlines()[-1].startswith("desched: error: profiles")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--dry_run"], ["--dry-run"]),
        (["--leader_elect_lease_duration=1m_s"], ["--leader-elect-lease-duration=1m_s"]),
        (["--policy-config-file", "a_b.yaml"], ["--policy-config-file", "a_b.yaml"]),
        (["--", "--x_y"], ["--", "--x_y"]),
        (["-v_1"], ["-v_1"]),
    ],
)
def test_underscores_in_flag_names_are_dashes_as_pflag(argv: list[str], expected: list[str]) -> None:
    assert cli.normalise_flag_names(argv) == expected


def test_underscore_spellings_parse_as_upstream() -> None:
    args = build_parser().parse_args(
        cli.normalise_flag_names(["run", "--policy_config_file=/p.yaml", "--dry_run", "--secure_port", "0"])
    )
    assert (args.policy_config_file, args.dry_run, args.secure_port) == ("/p.yaml", True, 0)


def test_a_port_taken_after_the_check_is_still_one_line() -> None:
    """The start checks the port before connecting; one taken between that check and the bind
    (a race) is told the same way by the server, not as a traceback."""
    from desched.errors import UserError
    from desched.runtime.server import HealthServer

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        server = HealthServer("127.0.0.1", port, registry=None, ready=lambda: True)
        with pytest.raises(UserError) as err:
            server.start()
    assert str(err.value).startswith(f"--secure-port: cannot listen on 127.0.0.1:{port}: ")


def test_a_start_that_cannot_connect_ends_in_a_json_line_with_json_logging(kubeconfig: Path) -> None:
    code, _, err, took = desched(
        "run",
        f"--policy-config-file={POLICY}",
        f"--kubeconfig={kubeconfig}",
        "--secure-port=0",
        "--client-connection-timeout=1s",
        "--logging-format=json",
    )
    assert code == 2
    lines = err.strip().splitlines()
    docs = [json.loads(line) for line in lines]  # every line is JSON, the last says why it stopped
    assert docs[-1]["level"] == "error" and docs[-1]["exitCode"] == 2
    assert docs[-1]["msg"].startswith("cannot reach the API server at https://127.0.0.1:"), docs[-1]
    assert took < 15
