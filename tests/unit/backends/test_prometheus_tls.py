"""``metricsProviders[].prometheus.tlsConfig`` honoured by the live Prometheus client, against a real
HTTPS server on 127.0.0.1 (aiohttp, certificates made here with ``cryptography``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes_asyncio import client

from desched.api.policy import PrometheusProvider
from desched.backends.usage_metrics import PrometheusQueries
from desched.errors import PolicyError
from desched.framework.metrics import UsageError

QUERY = "instance:node_cpu:rate:sum"
SERVER_NAME = "prometheus.monitoring.svc"


@dataclass
class Issued:
    cert: Path
    key: Path


class CA:
    """A throw-away certificate authority writing PEM files into ``directory``."""

    def __init__(self, directory: Path, name: str = "test-ca") -> None:
        self.dir = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        self.pem = directory / f"{name}.crt"
        self.pem.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, *, dns: list[str], client_auth: bool = False) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client_auth else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        if dns:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False
            )
        cert = builder.sign(self.key, hashes.SHA256())
        out = Issued(self.dir / f"{name}.crt", self.dir / f"{name}.key")
        out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        out.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return out


@dataclass
class Seen:
    tokens: list[str]
    client_certs: list[str]


@asynccontextmanager
async def https_prometheus(
    ca: CA, *, dns: list[str], client_ca: CA | None = None, min_version: ssl.TLSVersion | None = None
) -> AsyncIterator[tuple[str, Seen]]:
    """A Prometheus /api/v1/query over HTTPS with a certificate of ``ca`` for ``dns``; with
    ``client_ca`` it requires a client certificate issued by that CA."""
    seen = Seen([], [])

    async def query(request: web.Request) -> web.Response:
        seen.tokens.append(request.headers.get("Authorization", ""))
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        if peer:
            seen.client_certs.append(dict(x[0] for x in peer["subject"])["commonName"])
        assert request.query["query"] == QUERY
        result = [{"metric": {"instance": "n1"}, "value": [1700000000.0, "0.75"]}]
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": result}})

    served = ca.issue("prometheus", dns=dns)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(served.cert, served.key)
    if min_version is not None:
        context.minimum_version = min_version
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=str(client_ca.pem))
    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"https://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


def provider(url: str, tls: dict[str, Any] | None = None) -> PrometheusProvider:
    doc: dict[str, Any] = {"url": url}
    if tls is not None:
        doc["tlsConfig"] = tls
    return PrometheusProvider.model_validate(doc)


async def one_query(url: str, sa_dir: Path, tls: dict[str, Any] | None = None) -> list[float]:
    """A cycle's query with the given tlsConfig (the token comes from the ServiceAccount dir)."""
    api = client.ApiClient(configuration=client.Configuration())
    prom = PrometheusQueries(api, provider(url, tls), [QUERY], service_account_dir=sa_dir)
    try:
        await prom.begin_cycle()
        return [s.value for s in prom.query(QUERY)]
    finally:
        await prom.close()
        await api.close()


@pytest.fixture
def sa_dir(tmp_path: Path) -> Path:
    d = tmp_path / "serviceaccount"
    d.mkdir()
    (d / "token").write_text("sa-token")
    return d


def test_ca_file_is_trusted_and_an_unknown_ca_is_refused(tmp_path: Path, sa_dir: Path) -> None:
    ca = CA(tmp_path)

    async def test() -> None:
        async with https_prometheus(ca, dns=["localhost"]) as (url, seen):
            url = url.replace("127.0.0.1", "localhost")
            # without tlsConfig: system CAs (and the pod's CA, absent here) do not know this CA
            with pytest.raises(UsageError, match=r"unable to capture prometheus metrics: .*certificate"):
                await one_query(url, sa_dir)
            assert seen.tokens == []  # nothing was sent before the server was verified
            assert await one_query(url, sa_dir, {"ca_file": str(ca.pem)}) == [0.75]
            assert seen.tokens == ["Bearer sa-token"]
            # another CA in ca_file: the server is not trusted
            other = CA(tmp_path, "other-ca")
            with pytest.raises(UsageError, match="certificate verify failed"):
                await one_query(url, sa_dir, {"ca_file": str(other.pem)})

    asyncio.run(test())


def test_server_name_is_checked_instead_of_the_urls_host(tmp_path: Path, sa_dir: Path) -> None:
    ca = CA(tmp_path)

    async def test() -> None:
        async with https_prometheus(ca, dns=[SERVER_NAME]) as (url, _):
            with pytest.raises(UsageError, match=r"certificate verify failed|match"):
                await one_query(url, sa_dir, {"ca_file": str(ca.pem)})  # 127.0.0.1 is not in the cert
            tls = {"ca_file": str(ca.pem), "server_name": SERVER_NAME}
            assert await one_query(url, sa_dir, tls) == [0.75]
            with pytest.raises(UsageError, match=r"certificate verify failed|match"):
                await one_query(url, sa_dir, {"ca_file": str(ca.pem), "server_name": "other.svc"})

    asyncio.run(test())


def test_insecure_skip_verify_accepts_any_certificate(tmp_path: Path, sa_dir: Path) -> None:
    ca = CA(tmp_path)

    async def test() -> None:
        async with https_prometheus(ca, dns=["nothing-to-do-with-it.example"]) as (url, seen):
            assert await one_query(url, sa_dir, {"insecure_skip_verify": True}) == [0.75]
            assert seen.tokens == ["Bearer sa-token"]

    asyncio.run(test())


def test_client_certificate_is_presented(tmp_path: Path, sa_dir: Path) -> None:
    ca = CA(tmp_path)
    clients = CA(tmp_path, "client-ca")
    mine = clients.issue("desched", dns=[], client_auth=True)

    async def test() -> None:
        async with https_prometheus(ca, dns=["localhost"], client_ca=clients) as (url, seen):
            url = url.replace("127.0.0.1", "localhost")
            with pytest.raises(UsageError, match="unable to capture prometheus metrics"):
                await one_query(url, sa_dir, {"ca_file": str(ca.pem)})
            tls = {"ca_file": str(ca.pem), "cert_file": str(mine.cert), "key_file": str(mine.key)}
            assert await one_query(url, sa_dir, tls) == [0.75]
            assert seen.client_certs == ["desched"]

    asyncio.run(test())


@pytest.mark.parametrize(
    ("tls", "field"),
    [
        ({"ca_file": "/nonexistent/ca.crt"}, "ca_file"),
        ({"cert_file": "/nonexistent/c.crt", "key_file": "/nonexistent/c.key"}, "cert_file"),
    ],
)
def test_a_file_that_cannot_be_loaded_names_its_field(
    tmp_path: Path, sa_dir: Path, tls: dict[str, str], field: str
) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")

    async def test() -> None:
        async with client.ApiClient(configuration=client.Configuration()) as api:
            with pytest.raises(PolicyError) as e:
                PrometheusQueries(
                    api,
                    provider("https://prometheus:9091", tls),
                    [QUERY],
                    service_account_dir=sa_dir,
                    field_path="metricsProviders[1].prometheus",
                )
            assert str(e.value).startswith(
                f"metricsProviders[1].prometheus.tlsConfig.{field}: cannot load '/nonexistent/"
            )
            # a file that is there but holds no certificate
            with pytest.raises(
                PolicyError, match=r"prometheus\.tlsConfig\.ca_file: cannot load '.*bad\.pem'"
            ):
                PrometheusQueries(
                    api, provider("https://p:1", {"ca_file": str(bad)}), [QUERY], service_account_dir=sa_dir
                )

    asyncio.run(test())


def test_inline_pem_text_is_trusted_and_presented(tmp_path: Path, sa_dir: Path) -> None:
    """``ca`` / ``cert`` / ``key`` carry the PEM text itself (prometheus/common's keys)."""
    ca = CA(tmp_path)
    clients = CA(tmp_path, "client-ca")
    mine = clients.issue("desched", dns=[], client_auth=True)

    async def test() -> None:
        async with https_prometheus(ca, dns=["localhost"], client_ca=clients) as (url, seen):
            url = url.replace("127.0.0.1", "localhost")
            tls = {
                "ca": ca.pem.read_text(),
                "cert": mine.cert.read_text(),
                "key": mine.key.read_text(),
            }
            assert await one_query(url, sa_dir, tls) == [0.75]
            assert seen.client_certs == ["desched"]

    asyncio.run(test())


def test_max_version_below_the_servers_is_refused(tmp_path: Path, sa_dir: Path) -> None:
    ca = CA(tmp_path)

    async def test() -> None:
        async with https_prometheus(ca, dns=["localhost"], min_version=ssl.TLSVersion.TLSv1_3) as (url, _):
            url = url.replace("127.0.0.1", "localhost")
            tls = {"ca_file": str(ca.pem), "min_version": "TLS13"}
            assert await one_query(url, sa_dir, tls) == [0.75]
            with pytest.raises(UsageError, match="unable to capture prometheus metrics"):
                await one_query(url, sa_dir, {"ca_file": str(ca.pem), "max_version": "TLS12"})

    asyncio.run(test())
