"""Start-up and live failures (issues 11 and 17): bounded, stop-aware, one line, exit code 2.

``desched run``, ``desched snapshot`` and ``desched extender`` run as processes, as users invoke
them, against: a closed port (connection refused), a server that accepts TCP and never answers
(blackhole), servers that answer garbage, plain HTTP where TLS is expected, or 500/404 (small
servers this module starts on 127.0.0.1; they stand for broken endpoints, not for the API
server), a kubeconfig whose exec credential plugin is missing, and the real kube-apiserver with a
wrong token (401), an identity without RBAC (403), an apiserver stopped and started under a
running ``desched run``, on a second, audited apiserver the User-Agent of every request, and,
through a proxy that drops ``pods/eviction`` from the real apiserver's discovery, the discovery
check.

Each failure case asserts exit code 2, exactly one stderr line naming the cause, no traceback, and
the time it took: most use a short ``--client-connection-timeout`` (3 s); the permanent failures
(401, 403, a missing exec plugin) use a long one and must end long before it. Process start-up
(imports, about 1-4 s on a loaded machine) is outside the bound, so limits allow ``START_SLACK``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane import ControlPlane
from tests.e2e.support import DeschedProcess, desched_env, wait_for

ROOT = Path(__file__).resolve().parents[2]
RBAC = ROOT / "deploy" / "kubernetes" / "base" / "rbac.yaml"
BOUND = 3.0
#: Python start-up and teardown around the bound (imports take 1-4 s on a busy 2-core machine).
START_SLACK = 12.0

POLICY = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerPolicy",
    "profiles": [
        {
            "name": "p",
            "pluginConfig": [
                {
                    "name": "PodLifeTime",
                    "args": {"maxPodLifeTimeSeconds": 86400, "namespaces": {"include": ["none"]}},
                }
            ],
            "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
        }
    ],
}


# --------------------------------------------------------------------------- broken endpoints


class BrokenServer:
    """A TCP server on 127.0.0.1 that fails in one way: ``blackhole`` (accepts, never answers),
    ``garbage`` (bytes that are not HTTP), ``plain-http`` (an HTTP answer where TLS is expected),
    or an HTTP status (``500``, ``404``) with a JSON body."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])
        self.accepted = 0
        self._held: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        if self.mode == "blackhole":
            self._held.append(conn)  # never read, never answer, never close
            return
        with contextlib.suppress(OSError), conn:
            conn.settimeout(5)
            conn.recv(65536)
            if self.mode == "garbage":
                conn.sendall(b"\x00\x17not http at all\r\n\r\n")
            elif self.mode == "plain-http":
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            else:
                body = json.dumps({"kind": "Status", "message": f"injected {self.mode}"}).encode()
                head = (
                    f"HTTP/1.1 {self.mode} X\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n"
                )
                conn.sendall(head.encode() + body)

    def close(self) -> None:
        self._closed = True
        self.sock.close()
        for c in self._held:
            c.close()


@contextlib.contextmanager
def broken_server(mode: str) -> Iterator[BrokenServer]:
    server = BrokenServer(mode)
    try:
        yield server
    finally:
        server.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_kubeconfig(path: Path, server: str, user: dict[str, Any] | None = None) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "desched", "user": user or {"token": "not-checked"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "desched"}}],
        "current-context": "x",
    }
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(POLICY))
    return path


# --------------------------------------------------------------------------- running desched


def desched(*args: str, timeout: float = 120) -> tuple[int, str, float]:
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "desched.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=desched_env(),
        check=False,
    )
    return proc.returncode, proc.stderr, time.monotonic() - began


def run_args(policy: Path, kubeconfig: Path, bound: float = BOUND) -> list[str]:
    return [
        "run",
        "--policy-config-file",
        str(policy),
        "--kubeconfig",
        str(kubeconfig),
        "--secure-port",
        "0",
        "--client-connection-timeout",
        f"{bound:g}s",
    ]


def assert_one_line(code: int, stderr: str, pattern: str) -> str:
    lines = stderr.strip().splitlines()
    assert "Traceback" not in stderr, stderr
    assert code == 2, f"exit {code}: {stderr}"
    assert len(lines) == 1, f"expected one line, got {len(lines)}:\n{stderr}"
    assert re.fullmatch(pattern, lines[0]), lines[0]
    return lines[0]


# --------------------------------------------------------------------------- no API server


def test_default_bound_is_30s_and_named_in_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "desched.cli", "run", "--help"],
        capture_output=True,
        text=True,
        env=desched_env(),
    ).stdout
    text = " ".join(out.split())
    assert re.search(r"--client-connection-timeout DURATION .*\(default 30s", text), text
    for command in ("snapshot", "extender"):
        other = subprocess.run(
            [sys.executable, "-m", "desched.cli", command, "--help"],
            capture_output=True,
            text=True,
            env=desched_env(),
        ).stdout
        assert "--client-connection-timeout" in other


def test_unreachable_server(policy: Path, tmp_path: Path) -> None:
    port = closed_port()
    kc = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{port}")
    code, err, took = desched(*run_args(policy, kc))
    assert_one_line(
        code,
        err,
        rf"desched: error: cannot reach the API server at https://127\.0\.0\.1:{port}: connection refused "
        rf"\(gave up after 3s\)",
    )
    assert BOUND <= took < BOUND + START_SLACK


def test_blackhole_server(policy: Path, tmp_path: Path) -> None:
    with broken_server("blackhole") as server:
        kc = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{server.port}")
        code, err, took = desched(*run_args(policy, kc))
        assert server.accepted >= 1
    assert_one_line(
        code,
        err,
        rf"desched: error: no answer from the API server at https://127\.0\.0\.1:{server.port} within 3s "
        r"\(it accepts connections but does not respond; --client-connection-timeout\)",
    )
    assert BOUND <= took < BOUND + START_SLACK


@pytest.mark.parametrize(
    ("mode", "scheme", "said"),
    [
        (
            "garbage",
            "http",
            r"the server at {url} did not answer as a Kubernetes API server: invalid HTTP \(.+\)",
        ),
        ("plain-http", "https", r"TLS handshake with {url} failed: .+ \(is it a plain HTTP server\?\)"),
        ("500", "http", r"the API server at {url} answered 500 Internal Server Error: injected 500"),
        ("404", "http", r"404 Not Found from {url} for GET /version: is this the Kubernetes API server .+"),
    ],
)
def test_server_answering_garbage(policy: Path, tmp_path: Path, mode: str, scheme: str, said: str) -> None:
    with broken_server(mode) as server:
        url = f"{scheme}://127.0.0.1:{server.port}"
        kc = write_kubeconfig(tmp_path / "kc", url)
        code, err, took = desched(*run_args(policy, kc))
    assert_one_line(
        code, err, "desched: error: " + said.format(url=re.escape(url)) + r" \(gave up after 3s\)"
    )
    assert BOUND <= took < BOUND + START_SLACK


def test_missing_exec_credential_plugin_fails_fast(policy: Path, tmp_path: Path) -> None:
    exec_user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "desched-e2e-no-such-credential-plugin",
            "interactiveMode": "Never",
        }
    }
    kc = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{closed_port()}", exec_user)
    code, err, took = desched(*run_args(policy, kc, bound=60))
    assert_one_line(
        code,
        err,
        r"desched: error: kubeconfig: the exec credential plugin 'desched-e2e-no-such-credential-plugin' "
        rf"of user 'desched' in {re.escape(str(kc))} was not found \(is it installed and on \$PATH\?\)",
    )
    assert took < START_SLACK  # permanent: not retried for the 60 s bound


@pytest.mark.parametrize("hangs", [False, True], ids=["fails", "hangs"])
def test_exec_credential_plugin_that_fails_or_hangs(policy: Path, tmp_path: Path, hangs: bool) -> None:
    """A plugin that fails ends the start at once, with what it said; one that hangs, at the bound,
    and it is ended (SIGTERM), not left waiting for input after desched exits."""
    pidfile = tmp_path / "plugin.pid"
    command = (
        [
            sys.executable,
            "-c",
            f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)",
        ]
        if hangs
        else ["sh", "-c", "echo the SSO session expired >&2; exit 3"]
    )
    exec_user = {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": command[0], "args": command[1:]}
    }
    kc = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{closed_port()}", exec_user)
    code, err, took = desched(*run_args(policy, kc))
    if not hangs:
        assert_one_line(
            code,
            err,
            rf"desched: error: kubeconfig: credentials of user 'desched' in {re.escape(str(kc))}: "
            r"exec: process returned 3\. the SSO session expired",
        )
        assert took < START_SLACK
        return
    assert_one_line(
        code,
        err,
        rf"desched: error: loading the credentials of {re.escape(str(kc))} did not finish within 3s "
        r"\(does its exec credential plugin wait for input\?\)",
    )
    assert BOUND <= took < BOUND + START_SLACK
    pid = int(pidfile.read_text())
    # desched has exited: its plugin, reparented if it were still there, must not be running
    stat = Path(f"/proc/{pid}/stat")
    state = stat.read_text().rsplit(")", 1)[1].split()[0] if stat.exists() else "gone"
    assert state in ("gone", "Z", "X"), f"the exec credential plugin (pid {pid}) is still running: {state}"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_start_ends_it_at_once(policy: Path, tmp_path: Path, sig: signal.Signals) -> None:
    with broken_server("blackhole") as server:
        kc = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{server.port}")
        proc = subprocess.Popen(
            [sys.executable, "-m", "desched.cli", *run_args(policy, kc, bound=120)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=desched_env(),
        )
        try:
            # desched is connecting once the server saw its connection: the wait has begun
            wait_for(lambda: server.accepted >= 1, "desched to connect", timeout=60)
            time.sleep(0.5)
            sent = time.monotonic()
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=30)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert_one_line(
        proc.returncode,
        err,
        rf"desched: error: stopped by {sig.name} during start-up, [0-9.]+s after connecting to "
        rf"https://127\.0\.0\.1:{server.port} began",
    )
    assert took < 5, took


def test_snapshot_against_a_dead_server(tmp_path: Path) -> None:
    port = closed_port()
    kc = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{port}")
    out = tmp_path / "snap.json"
    code, err, took = desched(
        "snapshot", "-o", str(out), "--kubeconfig", str(kc), "--client-connection-timeout", "3s"
    )
    assert_one_line(
        code,
        err,
        rf"desched: error: cannot reach the API server at https://127\.0\.0\.1:{port}: connection refused "
        rf"\(gave up after 3s\)",
    )
    assert BOUND <= took < BOUND + START_SLACK
    assert not out.exists() and not list(tmp_path.glob("snap.json.tmp*"))


def test_extender_live_mode_against_a_dead_server(tmp_path: Path) -> None:
    port = closed_port()
    kc = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{port}")
    scorer = ROOT / "deploy" / "extender" / "scorer.yaml"
    code, err, took = desched(
        "extender",
        "--config",
        str(scorer),
        "--kubeconfig",
        str(kc),
        "--bind-address",
        "127.0.0.1",
        "--port",
        str(closed_port()),
        "--client-connection-timeout",
        "3s",
    )
    assert "Traceback" not in err and code == 2, err
    errors = [line for line in err.splitlines() if line.startswith("desched: error:")]
    assert errors == [
        f"desched: error: cannot reach the API server at https://127.0.0.1:{port}: connection refused "
        "(gave up after 3s)"
    ], err
    assert took < BOUND + START_SLACK


# --------------------------------------------------------------------------- the real API server


def real_plane(control_plane: Any) -> ControlPlane:
    if getattr(control_plane, "external", False):
        pytest.skip("needs the built-in control plane (tokens it issued, stopping its apiserver)")
    cp: ControlPlane = control_plane
    return cp


def test_bad_token_401_fails_fast(control_plane: Any, policy: Path) -> None:
    cp = real_plane(control_plane)
    kc = cp.kubeconfig_for_token("not-a-token-the-apiserver-knows", name="e2e-bad-token")
    code, err, took = desched(*run_args(policy, kc, bound=60))
    assert_one_line(
        code,
        err,
        rf"desched: error: 401 Unauthorized from the API server at {re.escape(cp.server)}: the credentials "
        rf"in {re.escape(str(kc))} \(user 'e2e-bad-token'\) were rejected",
    )
    assert took < START_SLACK  # permanent: not retried for the 60 s bound


def test_exec_credentials_are_refreshed_in_a_running_desched(
    control_plane: Any, policy: Path, tmp_path: Path
) -> None:
    """``desched run`` runs its exec credential plugin again before the token expires, and its next
    requests carry the new token: here the plugin's second token is the unprivileged identity's, so
    the leader election's next lease request is refused as that user."""
    cp = real_plane(control_plane)
    counter = tmp_path / "runs"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import datetime, json, os, sys\n"
        f"counter = {str(counter)!r}\n"
        "n = int(open(counter).read()) + 1 if os.path.exists(counter) else 1\n"
        "open(counter, 'w').write(str(n))\n"
        f"token = {cp.admin_token!r} if n == 1 else {cp.unprivileged_token!r}\n"
        "at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=302)\n"
        "status = {'token': token, 'expirationTimestamp': at.strftime('%Y-%m-%dT%H:%M:%SZ')}\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential', "
        "'status': status}))\n"
    )
    admin = json.loads(cp.kubeconfig.read_text())
    admin["users"] = [
        {
            "name": "refreshing",
            "user": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": sys.executable,
                    "args": [str(plugin)],
                }
            },
        }
    ]
    admin["contexts"][0]["context"]["user"] = "refreshing"
    kc = tmp_path / "kc"
    kc.write_text(json.dumps(admin))
    lease = f"desched-e2e-refresh-{os.getpid()}"
    d = DeschedProcess(
        kc,
        tmp_path,
        policy,
        "--descheduling-interval",
        "1h",
        "--leader-elect",
        "--leader-elect-resource-name",
        lease,
        "--leader-elect-lease-duration",
        "6s",
        "--leader-elect-renew-deadline",
        "4s",
        "--leader-elect-retry-period",
        "1s",
    )
    try:
        refreshed = "refreshed the credentials of user 'refreshing'"
        wait_for(lambda: refreshed in d.log.read_text(), "a refresh", 30)
        wait_for(lambda: "e2e-unprivileged" in d.log.read_text(), "a request with the new token", 30)
    finally:
        d.stop()
    assert counter.read_text() in ("2", "3")  # once at the start, then about 2 s later (and 5 s after)
    log = d.log.read_text()
    assert "Traceback" not in log
    assert log.index("refreshed the credentials") < log.index("e2e-unprivileged")


def test_missing_rbac_403_fails_fast(control_plane: Any, policy: Path) -> None:
    cp = real_plane(control_plane)
    kc = cp.kubeconfig_for_token(cp.unprivileged_token, name="e2e-unprivileged")
    code, err, took = desched(*run_args(policy, kc, bound=60))
    assert_one_line(
        code,
        err,
        # run streams its cache by watch-list (the first request is a watch of some kind); with
        # DESCHED_WATCH_LIST=false it lists first
        rf"desched: error: 403 Forbidden from the API server at {re.escape(cp.server)}: e2e-unprivileged "
        r"cannot (?:watch|list) \S+ at the cluster scope \(RBAC: bind the ClusterRole in "
        r"deploy/kubernetes/base/rbac.yaml to this identity\)",
    )
    assert took < START_SLACK
    code, err, took = desched("snapshot", "-o", os.devnull + ".x", "--kubeconfig", str(kc))
    assert_one_line(
        code, err, r"desched: error: 403 Forbidden from the API server at .+ cannot list .+ \(RBAC.+"
    )


def test_kubeconfig_list_merges_as_kubectl(control_plane: Any, tmp_path: Path) -> None:
    """KUBECONFIG=a:b: current-context from the first file that sets it, each entry from the first
    file that names it; the second file's conflicting context (a dead server) loses."""
    cp = real_plane(control_plane)
    admin = json.loads(cp.kubeconfig.read_text())
    first = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "e2e",
        "contexts": [{"name": "e2e", "context": {"cluster": "real", "user": "admin"}}],
        "users": [{"name": "admin", "user": admin["users"][0]["user"]}],
    }
    second = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "dead",
        "clusters": [
            {"name": "real", "cluster": admin["clusters"][0]["cluster"]},
            {"name": "dead", "cluster": {"server": f"https://127.0.0.1:{closed_port()}"}},
        ],
        "contexts": [
            {"name": "e2e", "context": {"cluster": "dead", "user": "admin"}},
            {"name": "dead", "context": {"cluster": "dead", "user": "admin"}},
        ],
        "users": [{"name": "admin", "user": {"token": "wrong"}}],
    }
    a, b = tmp_path / "a.kubeconfig", tmp_path / "b.kubeconfig"
    a.write_text(json.dumps(first))
    b.write_text(json.dumps(second))
    out = tmp_path / "snap.json"
    env = {**desched_env(), "KUBECONFIG": f"{a}{os.pathsep}{b}"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "desched.cli",
            "snapshot",
            "-o",
            str(out),
            "--client-connection-timeout",
            "10s",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    kinds = {item["kind"] for item in json.loads(out.read_text())["items"]}
    assert "Namespace" in kinds
    # reversed, the dead server's context is the current one: one line, exit 2
    env["KUBECONFIG"] = f"{b}{os.pathsep}{a}"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "desched.cli",
            "snapshot",
            "-o",
            str(out),
            "--client-connection-timeout",
            "2s",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert_one_line(
        proc.returncode,
        proc.stderr,
        r"desched: error: cannot reach the API server at .+: connection refused.*",
    )


def test_apiserver_down_under_a_running_desched(control_plane: Any, policy: Path, tmp_path: Path) -> None:
    """The apiserver stops for ~15 s under ``desched run --descheduling-interval 1s``: failures are
    logged once per class per interval (no traceback), cycles are skipped and said so (not run on
    the stale cache), and cycles resume after it comes back."""
    cp = real_plane(control_plane)
    d = DeschedProcess(
        cp.kubeconfig, tmp_path, policy, "--descheduling-interval", "1s", "--client-connection-timeout", "3s"
    )
    try:
        wait_for(lambda: d.cycles() >= 1, "first cycle", timeout=60)
        cp.stop_apiserver()
        down = time.monotonic()
        try:
            wait_for(lambda: "cycle skipped" in d.text(), "a cycle to be skipped", timeout=30)
            time.sleep(max(0.0, 15 - (time.monotonic() - down)))
        finally:
            cp.start_apiserver()
        outage = time.monotonic() - down
        before = d.cycles()
        wait_for(lambda: d.cycles() >= before + 2, "cycles after the apiserver is back", timeout=90)
        assert d.proc.poll() is None, d.text()
    finally:
        assert d.stop() == 0, d.text()
    log = d.text()
    assert "Traceback" not in log, log
    retries = [line for line in log.splitlines() if "retrying with backoff" in line]
    assert retries, log
    # the failure class, roughly: the cause with the kind and the server left out
    classes = {
        re.sub(r"^.*?: \w+ (?:list|watch): ", "", line).replace(cp.server, "").split(";")[0][:40]
        for line in retries
    }
    # at most one line per failure class per 10 s (+1 for the first of each class)
    assert len(retries) <= len(classes) * (int(outage // 10) + 2), "\n".join(retries)
    skipped = [line for line in log.splitlines() if "cycle skipped: the cache is not in sync" in line]
    assert skipped and all("nothing is decided on stale data" in line for line in skipped), log


# --------------------------------------------------------------------------- an audited apiserver

AUDIT_USER = "desched-ua-probe"


@pytest.fixture(scope="module")
def audited(
    control_plane: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ControlPlane, Path]]:
    """A second control plane whose apiserver writes an audit log of one user's requests."""
    real_plane(control_plane)  # the session's plane built the binaries; this one reuses them
    work = tmp_path_factory.mktemp("audited")
    audit_policy = work / "audit-policy.yaml"
    audit_policy.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "audit.k8s.io/v1",
                "kind": "Policy",
                "omitStages": ["RequestReceived"],
                "rules": [{"level": "Metadata", "users": [AUDIT_USER]}, {"level": "None"}],
            }
        )
    )
    log = work / "audit.log"
    cp = ControlPlane(
        apiserver_args=[f"--audit-policy-file={audit_policy}", f"--audit-log-path={log}"],
        extra_tokens={"ua-probe-token-0123456789abcdef": (AUDIT_USER, ["system:masters"])},
    )
    cp.start()
    try:
        yield cp, log
    finally:
        cp.stop()


def test_every_request_carries_the_user_agent(audited: tuple[ControlPlane, Path], policy: Path) -> None:
    cp, log = audited
    kc = cp.kubeconfig_for_token("ua-probe-token-0123456789abcdef", name="ua-probe")
    code, err, _ = desched(*run_args(policy, kc, bound=30), "--dry-run", "--descheduling-interval", "0")
    assert code == 0, err
    code, err, _ = desched("snapshot", "-o", str(log.parent / "snap.json"), "--kubeconfig", str(kc))
    assert code == 0, err
    expected = subprocess.run(
        [sys.executable, "-c", "from desched.kube.client import user_agent; print(user_agent())"],
        capture_output=True,
        text=True,
        env=desched_env(),
        check=True,
    ).stdout.strip()
    assert re.fullmatch(r"desched/\d+\.\d+\.\d+\S* \([a-z]+/[a-z0-9_]+\)( [0-9a-f]{7})?", expected), expected

    def events() -> list[dict[str, Any]]:
        out = []
        for line in log.read_text().splitlines():
            ev = json.loads(line)
            if ev.get("user", {}).get("username") == AUDIT_USER:
                out.append(ev)
        return out

    evs = wait_for(
        lambda: [e for e in events() if "watch=true" in e["requestURI"]] and events(), "audit events"
    )
    agents = {e["userAgent"] for e in evs}
    assert agents == {expected}, agents
    uris = {e["requestURI"].split("?")[0] for e in evs}
    assert {"/version", "/api/v1", "/api/v1/pods", "/api/v1/nodes"} <= uris, uris


class DiscoveryProxy:
    """Plain HTTP on 127.0.0.1 in front of the real apiserver: forwards GETs (with the caller's
    token) and answers ``/api/v1`` without ``pods/eviction``, as a server that does not serve it
    would. kube-apiserver 1.36 serves it whatever ``--runtime-config`` says, so the fault is
    injected on the way."""

    def __init__(self, cp: ControlPlane) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                status, body = cp.raw_request("GET", self.path, token=token or None)
                if self.path.split("?")[0] == "/api/v1" and status == 200:
                    doc = json.loads(body)
                    doc["resources"] = [r for r in doc["resources"] if r["name"] != "pods/eviction"]
                    body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_discovery_refuses_a_server_without_pods_eviction(
    control_plane: Any, policy: Path, tmp_path: Path
) -> None:
    """Upstream checks discovery for pods/eviction at start (and exits 0 silently without it);
    desched ends with one line and exit code 2."""
    cp = real_plane(control_plane)
    proxy = DiscoveryProxy(cp)
    try:
        kc = write_kubeconfig(tmp_path / "kc", proxy.url, {"token": cp.admin_token})
        code, err, took = desched(*run_args(policy, kc, bound=30))
    finally:
        proxy.close()
    assert_one_line(
        code,
        err,
        rf"desched: error: the API server at {re.escape(proxy.url)} does not serve the pods/eviction "
        r"subresource in policy/v1 \(Kubernetes 1\.22 or later does\): desched evicts only through it",
    )
    assert took < START_SLACK


def test_the_cache_is_streamed_by_watch_list_and_listed_when_told(
    audited: tuple[ControlPlane, Path], policy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kube-apiserver 1.36 streams initial events: desched fills its cache with one watch-list per
    kind (no paginated LIST); with DESCHED_WATCH_LIST=false it LISTs then WATCHes, as before."""
    cp, log = audited
    kc = cp.kubeconfig_for_token("ua-probe-token-0123456789abcdef", name="ua-probe")

    def requests_of_one_run() -> list[str]:
        seen = len(log.read_text().splitlines()) if log.exists() else 0
        code, err, _ = desched(*run_args(policy, kc, bound=30), "--dry-run", "--descheduling-interval", "0")
        assert code == 0, err

        def uris() -> list[str]:
            lines = log.read_text().splitlines()[seen:]
            evs = [json.loads(line) for line in lines]
            return [e["requestURI"] for e in evs if e.get("user", {}).get("username") == AUDIT_USER]

        def asked(path: str) -> bool:  # a one-shot run may exit before its LIST's watch starts
            return any(u.startswith(path + "?") for u in uris())

        return wait_for(lambda: asked("/api/v1/pods") and asked("/api/v1/nodes") and uris(), "audit")

    def of(uris: list[str], path: str) -> list[str]:
        return [u for u in uris if u.startswith(path + "?")]

    streamed = requests_of_one_run()
    for path in ("/api/v1/pods", "/api/v1/nodes"):
        assert any("sendInitialEvents=true" in u for u in of(streamed, path)), streamed
        assert not any("limit=500" in u for u in of(streamed, path)), streamed
    monkeypatch.setenv("DESCHED_WATCH_LIST", "false")
    listed = requests_of_one_run()
    for path in ("/api/v1/pods", "/api/v1/nodes"):
        assert any("limit=500" in u for u in of(listed, path)), listed
        assert not any("sendInitialEvents" in u for u in of(listed, path)), listed
