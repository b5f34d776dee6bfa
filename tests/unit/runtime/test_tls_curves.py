"""--tls-curve-preferences (apiserver's serving flag): upstream's curve IDs, applied to the context."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from desched.errors import UserError
from desched.runtime.tls import apply_curves, parse_curves, server_context, serving_certificate


def test_curves_as_upstream_writes_them_or_by_go_name() -> None:
    assert parse_curves(["23", "24", "25", "29", "4588"]) == [23, 24, 25, 29, 4588]
    assert parse_curves(["CurveP384", "x25519", " 23 "]) == [24, 29, 23]
    assert parse_curves([]) == []


@pytest.mark.parametrize(
    ("values", "reason"),
    [(["99"], "unknown curve '99' (known: 23 (CurveP256)"), (["23", "CurveP256"], "listed twice")],
)
def test_unknown_or_repeated_curves_are_refused(values: list[str], reason: str) -> None:
    with pytest.raises(UserError, match=r"^--tls-curve-preferences: ") as err:
        parse_curves(values)
    assert reason in str(err.value)


def _handshake(server: ssl.SSLContext, client_curve: str) -> str | None:
    """Handshake over a socket pair with a client offering only ``client_curve``; None when it
    works, else the client's error."""
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    client.set_ecdh_curve(client_curve)
    a, b = socket.socketpair()
    a.settimeout(10)
    b.settimeout(10)

    def serve() -> None:
        try:
            with server.wrap_socket(b, server_side=True) as s:
                s.recv(1)
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(a, server_hostname="localhost") as c:
            c.sendall(b"x")
        return None
    except (ssl.SSLError, OSError) as e:
        return str(e)
    finally:
        a.close()
        thread.join(10)
        b.close()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return serving_certificate("", "", str(tmp_path_factory.mktemp("certs")))


def test_python_without_set_groups_keeps_the_library_defaults(pair: tuple[str, str]) -> None:
    """What this runtime does, measured: Python 3.11's ssl cannot restrict the groups, so the list
    is not applied (and desched says so at start) rather than claimed."""
    ctx = server_context(*pair, curves=[24])
    if hasattr(ctx, "set_groups"):
        assert _handshake(ctx, "secp384r1") is None
        assert _handshake(ctx, "prime256v1") is not None  # P-256 is no longer offered
    else:
        assert _handshake(ctx, "prime256v1") is None


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def set_groups(self, text: str) -> None:
        self.calls.append(text)


def test_where_set_groups_exists_the_whole_list_is_applied_in_order() -> None:
    ctx = _Recorder()
    assert apply_curves(ctx, [29, 24, 23])
    assert ctx.calls == ["X25519:secp384r1:prime256v1"]
    assert not apply_curves(ctx, [])
    assert not apply_curves(object(), [23])  # no set_groups: not applied, and told


def test_run_warns_that_the_curves_are_not_applied_here(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    kubeconfig = tmp_path / "kc"  # a server nobody runs: the start gives up after 1s
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: "
        "'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, "
        "context: {cluster: c, user: u}}]\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "desched.cli",
            "run",
            f"--policy-config-file={root / 'examples' / 'policy.yaml'}",
            "--tls-curve-preferences=23",
            "--secure-port=0",
            f"--kubeconfig={kubeconfig}",
            "--client-connection-timeout=1s",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    if hasattr(ssl.SSLContext, "set_groups"):
        assert "not applied" not in proc.stderr
    else:
        assert "--tls-curve-preferences is checked but not applied" in proc.stderr


def test_run_refuses_an_unknown_curve_before_anything_else(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "desched.cli",
            "run",
            f"--policy-config-file={root / 'examples' / 'policy.yaml'}",
            "--tls_curve_preferences=23,P-999",  # upstream's spelling with _ too
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("desched: error: --tls-curve-preferences: unknown curve 'P-999'"), (
        proc.stderr
    )
    assert proc.stderr.count("\n") == 1
