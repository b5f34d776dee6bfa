"""LowNodeUtilization on actual usage through a real kube-apiserver's aggregation layer.

A control plane of its own, started with front-proxy credentials and
``--enable-aggregator-routing``, and an APIService ``v1beta1.metrics.k8s.io`` backed by a small
HTTPS server in this process (reached at the host's non-loopback address through a Service and its
endpoints). ``desched run`` then reads NodeMetrics and PodMetrics as from metrics-server.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from tests import builders
from tests.e2e.controlplane import ApiError, ControlPlane
from tests.e2e.support import run_desched, wait_for

GROUP_VERSION = "metrics.k8s.io/v1beta1"


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], capture_output=True, check=True)


def host_address() -> str | None:
    """A non-loopback IPv4 address of this host (endpoints may not be loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.254", 9))  # no packet is sent
            address = str(s.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") else address


@dataclass
class Metrics:
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    pods: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    node_lists: int = 0


class MetricsServer:
    """metrics.k8s.io/v1beta1 over HTTPS, in a thread of its own."""

    def __init__(self, metrics: Metrics, cert: Path, key: Path) -> None:
        self.metrics = metrics
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(str(cert), str(key))
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def _app(self) -> web.Application:
        m = self.metrics

        async def discovery(_: web.Request) -> web.Response:
            resources = [
                {
                    "name": "nodes",
                    "singularName": "",
                    "namespaced": False,
                    "kind": "NodeMetrics",
                    "verbs": ["get", "list"],
                },
                {
                    "name": "pods",
                    "singularName": "",
                    "namespaced": True,
                    "kind": "PodMetrics",
                    "verbs": ["get", "list"],
                },
            ]
            return web.json_response(
                {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": GROUP_VERSION,
                    "resources": resources,
                }
            )

        async def nodes(_: web.Request) -> web.Response:
            m.node_lists += 1
            items = [
                {"metadata": {"name": n}, "timestamp": "2026-01-01T00:00:00Z", "window": "10s", "usage": u}
                for n, u in m.nodes.items()
            ]
            return web.json_response(
                {"kind": "NodeMetricsList", "apiVersion": GROUP_VERSION, "metadata": {}, "items": items}
            )

        async def pod(request: web.Request) -> web.Response:
            key = (request.match_info["ns"], request.match_info["name"])
            if key not in m.pods:
                status = {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "NotFound",
                    "code": 404,
                }
                return web.json_response(status, status=404)
            body = {
                "kind": "PodMetrics",
                "apiVersion": GROUP_VERSION,
                "metadata": {"name": key[1], "namespace": key[0]},
                "timestamp": "2026-01-01T00:00:00Z",
                "window": "10s",
                "containers": [{"name": "c", "usage": m.pods[key]}],
            }
            return web.json_response(body)

        app = web.Application()
        app.router.add_get(f"/apis/{GROUP_VERSION}", discovery)
        app.router.add_get(f"/apis/{GROUP_VERSION}/nodes", nodes)
        app.router.add_get(f"/apis/{GROUP_VERSION}/namespaces/{{ns}}/pods/{{name}}", pod)
        return app

    def start(self) -> None:
        self._thread.start()

        async def serve() -> int:
            self._runner = web.AppRunner(self._app())
            await self._runner.setup()
            site = web.TCPSite(self._runner, "0.0.0.0", 0, ssl_context=self.context)
            await site.start()
            server = site._server
            assert server is not None
            return int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]

        self.port = asyncio.run_coroutine_threadsafe(serve(), self.loop).result(10)

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


@dataclass
class Aggregated:
    cp: ControlPlane
    metrics: Metrics


def front_proxy_pki(pki: Path) -> list[str]:
    """Front-proxy CA and client certificate; the apiserver flags that use them."""
    pki.mkdir(parents=True, exist_ok=True)
    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "30",
        "-subj", "/CN=front-proxy-ca", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        "-keyout", str(pki / "fp-ca.key"), "-out", str(pki / "fp-ca.crt"),
    )  # fmt: skip
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-sha256", "-subj", "/CN=front-proxy-client",
        "-keyout", str(pki / "fp.key"), "-out", str(pki / "fp.csr"),
    )  # fmt: skip
    (pki / "fp.ext").write_text("extendedKeyUsage=clientAuth\n")
    openssl(
        "x509", "-req", "-sha256", "-days", "30", "-in", str(pki / "fp.csr"), "-CA", str(pki / "fp-ca.crt"),
        "-CAkey", str(pki / "fp-ca.key"), "-CAcreateserial", "-extfile", str(pki / "fp.ext"),
        "-out", str(pki / "fp.crt"),
    )  # fmt: skip
    # the metrics server's own (self-signed; the APIService skips verification as metrics-server's does)
    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "30", "-subj", "/CN=metrics",
        "-keyout", str(pki / "metrics.key"), "-out", str(pki / "metrics.crt"),
    )  # fmt: skip
    return [
        f"--requestheader-client-ca-file={pki / 'fp-ca.crt'}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki / 'fp.crt'}",
        f"--proxy-client-key-file={pki / 'fp.key'}",
        "--enable-aggregator-routing=true",
    ]


@pytest.fixture(scope="module")
def aggregated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Aggregated]:
    address = host_address()
    if address is None:
        pytest.skip("no non-loopback IPv4 address for the APIService's endpoints")
    pki = tmp_path_factory.mktemp("front-proxy")
    cp = ControlPlane(apiserver_args=front_proxy_pki(pki))
    metrics = Metrics()
    server = MetricsServer(metrics, pki / "metrics.crt", pki / "metrics.key")
    try:
        cp.start()
        server.start()
        ns = "kube-system"
        port = {"name": "https", "port": 443, "protocol": "TCP", "targetPort": server.port}
        cp.request("POST", f"/api/v1/namespaces/{ns}/services", {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics-server"},
            "spec": {"ports": [port]},
        })  # fmt: skip
        cp.request("POST", f"/api/v1/namespaces/{ns}/endpoints", {
            "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "metrics-server"},
            "subsets": [{"addresses": [{"ip": address}],
                         "ports": [{"name": "https", "port": server.port, "protocol": "TCP"}]}],
        })  # fmt: skip
        cp.request("POST", f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "metrics-server-1",
                         "labels": {"kubernetes.io/service-name": "metrics-server"}},
            "addressType": "IPv4", "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": server.port, "protocol": "TCP"}],
        })  # fmt: skip
        cp.request("POST", "/apis/apiregistration.k8s.io/v1/apiservices", {
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "insecureSkipTLSVerify": True,
                     "groupPriorityMinimum": 100, "versionPriority": 100,
                     "service": {"namespace": ns, "name": "metrics-server", "port": 443}},
        })  # fmt: skip

        def served() -> bool:
            try:
                cp.request("GET", f"/apis/{GROUP_VERSION}/nodes")
            except ApiError:
                return False
            return True

        wait_for(served, "metrics.k8s.io through the aggregator", timeout=60)
        cp.start_kwok()
        yield Aggregated(cp, metrics)
    finally:
        server.stop()
        cp.stop()


def owned_pod(name: str, node: str, cpu: str) -> dict[str, Any]:
    return builders.pod_doc(
        name,
        namespace=None,
        owner={"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": str(uuid.uuid4())},
        node=node,
        tolerations=[{"operator": "Exists"}],
        containers=[
            {"name": "c", "image": "fake", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}
        ],
        phase=None,
        spec={"automountServiceAccountToken": False},
    )


def test_lnu_evicts_from_the_node_hot_by_metrics(aggregated: Aggregated, tmp_path: Path) -> None:
    cp, metrics = aggregated.cp, aggregated.metrics
    label = f"mx-{uuid.uuid4().hex[:6]}"
    names = [f"{label}-{i}" for i in range(3)]
    for n in names:
        cp.create_fake_node(n, cpu="4", memory="8Gi", labels={"e2e/metrics": label})
    ns = label
    cp.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    # no kube-controller-manager here to create it
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    cp.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts", sa)
    hot, cold = names[0], names[1:]
    # by requests every node is cold (100m of 4 cpu each); by metrics the first is at 85%
    pods = {f"a{i}": hot for i in range(3)} | {"b0": cold[0], "c0": cold[1]}
    for name, node in pods.items():

        def created(name: str = name, node: str = node) -> bool:
            try:  # the admission's view of the new ServiceAccount lags a little
                cp.request("POST", f"/api/v1/namespaces/{ns}/pods", owned_pod(name, node, "100m"))
            except ApiError as e:
                if e.status == 403 and "service account" in str(e):
                    return False
                raise
            return True

        wait_for(created, f"pod {name} created", timeout=30)
        metrics.pods[(ns, name)] = {"cpu": "900m" if node == hot else "50m", "memory": "100Mi"}
    metrics.nodes = {hot: {"cpu": "3400m", "memory": "2Gi"}} | {
        n: {"cpu": "200m", "memory": "1Gi"} for n in cold
    }

    def running() -> bool:
        items = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        return len(items) == len(pods) and all(p.get("status", {}).get("phase") == "Running" for p in items)

    wait_for(running, "pods running on kwok nodes", timeout=60)
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "descheduler/v1alpha2",
                "kind": "DeschedulerPolicy",
                "nodeSelector": f"e2e/metrics={label}",
                "metricsProviders": [{"source": "KubernetesMetrics"}],
                "profiles": [
                    {
                        "name": "p",
                        "pluginConfig": [
                            {
                                "name": "LowNodeUtilization",
                                "args": {
                                    "thresholds": {"cpu": 20, "memory": 20},
                                    "targetThresholds": {"cpu": 50, "memory": 50},
                                    "metricsUtilization": {"source": "KubernetesMetrics"},
                                },
                            }
                        ],
                        "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}},
                    }
                ],
            }
        )
    )
    proc = run_desched(
        "--v=2",
        "run",
        "--policy-config-file",
        str(policy),
        "--kubeconfig",
        str(cp.kubeconfig),
        "--secure-port=0",
    )
    assert proc.returncode == 0, proc.stderr
    assert metrics.node_lists >= 1
    # 3400m -> 2500m (62.5%) -> 1600m (40%, under the 50% target): two pods leave the hot node
    evicted = [line for line in proc.stderr.splitlines() if "evicted pod" in line]
    assert len(evicted) == 2, proc.stderr
    assert all(f" node={hot} " in line for line in evicted), proc.stderr
