"""--tls-min-version, --tls-cipher-suites, --tls-sni-cert-key and --permit-port-sharing on the served port."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import pytest

from desched.errors import UserError
from desched.runtime.server import HealthServer
from desched.runtime.tls import _self_signed, server_context


def _pair(tmp: Path, name: str) -> tuple[str, str]:
    cert, key = tmp / f"{name}.crt", tmp / f"{name}.key"
    _self_signed(cert, key)
    return str(cert), str(key)


def _handshake(
    port: int, *, server_hostname: str = "localhost", max_version: ssl.TLSVersion | None = None
) -> tuple[bytes, str]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if max_version is not None:
        ctx.maximum_version = max_version
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname=server_hostname) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
        assert der is not None
        return der, tls.version() or ""


def _der(path: str) -> bytes:
    return ssl.PEM_cert_to_DER_cert(Path(path).read_text())


def _serve(ctx: ssl.SSLContext, reuse_port: bool = False, port: int = 0) -> HealthServer:
    server = HealthServer(
        "127.0.0.1", port, registry=None, ready=lambda: True, tls=ctx, reuse_port=reuse_port
    )
    server.start()
    return server


def test_min_version_and_sni(tmp_path: Path) -> None:
    default = _pair(tmp_path, "default")
    other = _pair(tmp_path, "other")
    ctx = server_context(
        *default, min_version="VersionTLS13", sni_cert_keys=[f"{other[0]},{other[1]}:*.foo.example"]
    )
    server = _serve(ctx)
    try:
        der, version = _handshake(server.port)
        assert der == _der(default[0]) and version == "TLSv1.3"
        der, _ = _handshake(server.port, server_hostname="api.foo.example")
        assert der == _der(other[0])
        with pytest.raises(ssl.SSLError):
            _handshake(server.port, max_version=ssl.TLSVersion.TLSv1_2)
    finally:
        server.stop()


def test_cipher_suites_by_their_iana_names(tmp_path: Path) -> None:
    pair = _pair(tmp_path, "c")  # an EC key: ECDSA suites
    ctx = server_context(*pair, cipher_suites=["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"])
    server = _serve(ctx)
    try:
        client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        client.check_hostname = False
        client.verify_mode = ssl.CERT_NONE
        client.maximum_version = ssl.TLSVersion.TLSv1_2
        with (
            socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw,
            client.wrap_socket(raw) as tls,
        ):
            cipher = tls.cipher()
            assert cipher is not None and cipher[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"
    finally:
        server.stop()
    with pytest.raises(UserError, match="unknown cipher suite 'TLS_NOPE'"):
        server_context(*pair, cipher_suites=["TLS_NOPE"])


def test_permit_port_sharing_lets_two_servers_bind_one_port(tmp_path: Path) -> None:
    ctx = server_context(*_pair(tmp_path, "p"))
    first = _serve(ctx, reuse_port=True)
    try:
        second = _serve(ctx, reuse_port=True, port=first.port)
        second.stop()
        with pytest.raises(UserError, match=r"--secure-port: cannot listen on 127\.0\.0\.1"):
            _serve(ctx, reuse_port=False, port=first.port)
    finally:
        first.stop()
