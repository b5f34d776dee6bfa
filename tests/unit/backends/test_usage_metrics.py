"""Live actual-usage providers against a real HTTP server on 127.0.0.1 (aiohttp): metrics.k8s.io
NodeMetrics/PodMetrics, Prometheus /api/v1/query with a bearer token, and an LNU cycle through the
runtime pieces."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client
from tests import builders

from desched.api.policy import load_policy
from desched.backends.api_eviction import ApiEvictionBackend
from desched.backends.usage_metrics import (
    BETA,
    NodeMetricsCollector,
    PrometheusQueries,
    UsageMetrics,
    weighted_average,
)
from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.framework import Framework
from desched.framework.metrics import UsageError
from desched.k8s.objects import Node, Pod
from desched.plugins import default_registry

REG = default_registry(entry_points=False)
SECRET = "/api/v1/namespaces/kube-system/secrets/prom-token"


@dataclass
class FakeCluster:
    """What the in-test server answers."""

    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    pods: dict[tuple[str, str], list[dict[str, str]]] = field(default_factory=dict)
    metrics_status: int = 200
    token: str | None = "secret-token"
    prometheus: dict[str, float] = field(default_factory=dict)
    prometheus_status: int = 200
    seen_tokens: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    node_polls: int = 0


def make_app(state: FakeCluster) -> web.Application:
    async def node_metrics(request: web.Request) -> web.Response:
        state.node_polls += 1
        if state.metrics_status != 200:
            return web.json_response(
                {"kind": "Status", "message": "unavailable"}, status=state.metrics_status
            )
        items = [
            {"kind": "NodeMetrics", "metadata": {"name": n}, "window": "20s", "usage": u}
            for n, u in state.nodes.items()
        ]
        return web.json_response(
            {"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "items": items}
        )

    async def pod_metrics(request: web.Request) -> web.Response:
        key = (request.match_info["ns"], request.match_info["name"])
        if state.metrics_status != 200 or key not in state.pods:
            status = state.metrics_status if state.metrics_status != 200 else 404
            return web.json_response({"kind": "Status", "message": "podmetrics not found"}, status=status)
        containers = [{"name": f"c{i}", "usage": u} for i, u in enumerate(state.pods[key])]
        return web.json_response(
            {"kind": "PodMetrics", "metadata": {"name": key[1]}, "containers": containers}
        )

    async def secret(request: web.Request) -> web.Response:
        if state.token is None:
            return web.json_response({"kind": "Status", "message": "secrets not found"}, status=404)
        data = {"prometheusAuthToken": base64.b64encode(state.token.encode()).decode()}
        return web.json_response({"kind": "Secret", "data": data})

    async def query(request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        state.seen_tokens.append(auth)
        if state.prometheus_status != 200:
            return web.Response(status=state.prometheus_status, text="down")
        if auth != f"Bearer {state.token}":
            return web.json_response({"status": "error", "error": "unauthorized"}, status=401)
        result = [
            {"metric": {"instance": n, "job": "node"}, "value": [1700000000.0, str(v)]}
            for n, v in state.prometheus.items()
        ]
        assert request.query["query"] == "instance:node_cpu:rate:sum"
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": result}})

    async def eviction(request: web.Request) -> web.Response:
        state.evicted.append(request.match_info["name"])
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    app = web.Application()
    app.router.add_get("/apis/metrics.k8s.io/v1beta1/nodes", node_metrics)
    app.router.add_get("/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/{name}", pod_metrics)
    app.router.add_get(SECRET, secret)
    app.router.add_get("/prometheus/api/v1/query", query)
    app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/eviction", eviction)
    return app


@asynccontextmanager
async def served(state: FakeCluster) -> AsyncIterator[tuple[client.ApiClient, str]]:
    server = TestServer(make_app(state), host="127.0.0.1")
    await server.start_server()
    cfg = client.Configuration()
    cfg.host = str(server.make_url("")).rstrip("/")
    api = client.ApiClient(configuration=cfg)
    try:
        yield api, cfg.host
    finally:
        await api.close()
        await server.close()


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- EWMA


@pytest.mark.parametrize(
    ("previous", "sample", "expected"),
    [
        (1000, 2000, 1100),
        (1100, 3000, 1290),  # 990 + 300
        (10, 14, 10),  # 10.4
        (10, 15, 11),  # 10.5 rounds half away from zero, as Go's math.Round
        (1, 0, 1),  # 0.9
        (0, 4, 0),  # 0.4
        (4 * 2**30, 0, 3865470566),  # memory in bytes: round(0.9 * 4Gi)
    ],
)
def test_weighted_average_is_upstreams(previous: int, sample: int, expected: int) -> None:
    assert BETA == 0.9
    assert weighted_average(previous, sample) == expected


def test_collector_smooths_node_usage_over_polls() -> None:
    state = FakeCluster(nodes={"n1": {"cpu": "1", "memory": "1Gi"}, "n2": {"cpu": "250m", "memory": "512Mi"}})

    async def test() -> None:
        async with served(state) as (api, _):
            collector = NodeMetricsCollector(api, asyncio.get_running_loop())
            assert await collector.collect()
            collector.begin_cycle()
            # the first sample is taken as is
            assert collector.node_usage() == {
                "n1": {"cpu": 1000, "memory": 2**30},
                "n2": {"cpu": 250, "memory": 2**29},
            }
            state.nodes = {"n1": {"cpu": "2", "memory": "2Gi"}}  # n2 missing from this poll
            assert await collector.collect()
            state.nodes = {"n1": {"cpu": "3000m", "memory": "2Gi"}, "n2": {"cpu": "1250m", "memory": "512Mi"}}
            assert await collector.collect()
            # the cycle reads what was frozen at its start until the next begin_cycle
            assert collector.node_usage()["n1"] == {"cpu": 1000, "memory": 2**30}
            collector.begin_cycle()
            usage = collector.node_usage()
            mem1 = weighted_average(weighted_average(2**30, 2**31), 2**31)
            assert usage["n1"] == {"cpu": 1290, "memory": mem1}
            assert usage["n2"] == {"cpu": 350, "memory": 2**29}  # kept 250 once, then 225 + 125

    run(test)


def test_pod_usage_is_fetched_for_the_worker_thread_and_not_smoothed() -> None:
    state = FakeCluster(
        pods={("default", "p1"): [{"cpu": "300m", "memory": "100Mi"}, {"cpu": "200m", "memory": "1Mi"}]}
    )

    async def test() -> None:
        async with served(state) as (api, _):
            collector = NodeMetricsCollector(api, asyncio.get_running_loop())
            collector.begin_cycle()
            used = await asyncio.to_thread(collector.pod_usage, "default", "p1")
            assert used == {"cpu": 500, "memory": 101 * 2**20}
            assert await asyncio.to_thread(collector.pod_usage, "default", "gone") is None
            # on the event loop itself it cannot wait: no usage rather than a deadlock
            assert collector.pod_usage("default", "other") is None

    run(test)


@pytest.mark.parametrize("status", [404, 503])
def test_unavailable_node_metrics_are_an_error_for_the_cycle(status: int) -> None:
    state = FakeCluster(nodes={"n1": {"cpu": "1", "memory": "1Gi"}}, metrics_status=status)

    async def test() -> None:
        async with served(state) as (api, _):
            now = [100.0]
            collector = NodeMetricsCollector(api, asyncio.get_running_loop(), clock=lambda: now[0])
            assert not await collector.collect()
            assert collector.not_served is (status == 404)
            collector.begin_cycle()
            with pytest.raises(UsageError, match="no node metrics collected yet"):
                collector.node_usage()
            # metrics come, then go away: stale after 15 s without a successful poll
            state.metrics_status = 200
            assert await collector.collect()
            state.metrics_status = status
            now[0] += 10
            assert not await collector.collect()
            collector.begin_cycle()
            assert collector.node_usage()["n1"]["cpu"] == 1000
            now[0] += 10
            collector.begin_cycle()
            with pytest.raises(UsageError, match="stale") as e:
                collector.node_usage()
            assert str(status) in str(e.value)

    run(test)


def test_wait_synced_gives_up_at_once_when_metrics_api_is_not_served() -> None:
    state = FakeCluster(metrics_status=404)

    async def test() -> None:
        async with served(state) as (api, _):
            collector = NodeMetricsCollector(api, asyncio.get_running_loop(), interval=0.05)
            stop = asyncio.Event()
            task = asyncio.create_task(collector.run(stop))
            loop = asyncio.get_running_loop()
            started = loop.time()
            assert not await collector.wait_synced(30)
            assert loop.time() - started < 5
            assert "not served" in (collector.last_error or "")
            stop.set()
            await task

    run(test)


# ----------------------------------------------------------------------------------- Prometheus


def prometheus_provider(url: str, secret: bool = True) -> Any:
    from desched.api.policy import PrometheusProvider

    doc: dict[str, Any] = {"url": url}
    if secret:
        doc["authToken"] = {"secretReference": {"namespace": "kube-system", "name": "prom-token"}}
    return PrometheusProvider.model_validate(doc)


QUERY = "instance:node_cpu:rate:sum"


def test_prometheus_query_with_the_secret_token_reread_when_it_changes() -> None:
    state = FakeCluster(prometheus={"n1": 0.82, "n2": 0.1})

    async def test() -> None:
        async with served(state) as (api, host):
            prom = PrometheusQueries(api, prometheus_provider(f"{host}/prometheus/"), [QUERY, QUERY])
            try:
                await prom.begin_cycle()
                samples = await asyncio.to_thread(prom.query, QUERY)
                assert {s.labels["instance"]: s.value for s in samples} == {"n1": 0.82, "n2": 0.1}
                assert state.seen_tokens == ["Bearer secret-token"]  # one query per cycle
                state.token = "rotated"
                await prom.begin_cycle()
                assert state.seen_tokens[-1] == "Bearer rotated"
                assert len(prom.query(QUERY)) == 2
                with pytest.raises(UsageError, match="was not run"):
                    prom.query("other")
                # the Secret is gone: an error for the cycle, no query sent
                state.token = None
                await prom.begin_cycle()
                with pytest.raises(UsageError, match="unable to get kube-system/prom-token secret: 404"):
                    prom.query(QUERY)
                assert len(state.seen_tokens) == 2
            finally:
                await prom.close()

    run(test)


def test_prometheus_uses_the_service_account_token_without_a_secret(tmp_path: Path) -> None:
    state = FakeCluster(token="sa-token", prometheus={"n1": 0.5})
    (tmp_path / "token").write_text("sa-token\n")

    async def test() -> None:
        async with served(state) as (api, host):
            provider = prometheus_provider(f"{host}/prometheus", secret=False)
            prom = PrometheusQueries(api, provider, [QUERY], service_account_dir=tmp_path)
            try:
                await prom.begin_cycle()
                assert [s.value for s in prom.query(QUERY)] == [0.5]
                assert state.seen_tokens == ["Bearer sa-token"]
                (tmp_path / "token").write_text("wrong")  # projected tokens rotate: read every cycle
                await prom.begin_cycle()
                with pytest.raises(UsageError, match="401 unauthorized"):
                    prom.query(QUERY)
            finally:
                await prom.close()

    run(test)


def test_prometheus_down_is_an_error_for_the_cycle() -> None:
    state = FakeCluster(prometheus_status=503)

    async def test() -> None:
        async with served(state) as (api, host):
            prom = PrometheusQueries(api, prometheus_provider(f"{host}/prometheus"), [QUERY])
            unreachable = PrometheusQueries(api, prometheus_provider("http://127.0.0.1:9"), [QUERY])
            try:
                await prom.begin_cycle()
                with pytest.raises(UsageError, match="503"):
                    prom.query(QUERY)
                await unreachable.begin_cycle()
                with pytest.raises(UsageError, match="unable to capture prometheus metrics"):
                    unreachable.query(QUERY)
            finally:
                await prom.close()
                await unreachable.close()

    run(test)


# --------------------------------------------------------------------- LowNodeUtilization, live


def node(name: str) -> Node:
    return builders.node(name, hostname_label=False)


def pod(name: str, node_name: str, cpu: str = "100m") -> Pod:
    return builders.pod(
        name,
        node=node_name,
        uid=name,
        owner=("ReplicaSet", "rs"),
        controller=None,
        cpu=cpu,
        memory="64Mi",
    )


def live_policy(
    metrics: dict[str, Any],
    providers: list[dict[str, Any]],
    thresholds: tuple[dict[str, Any], dict[str, Any]],
) -> Any:
    return load_policy(
        {
            "apiVersion": "descheduler/v1alpha2",
            "kind": "DeschedulerPolicy",
            "metricsProviders": providers,
            "profiles": [
                {
                    "name": "p",
                    "pluginConfig": [
                        {
                            "name": "LowNodeUtilization",
                            "args": {
                                "thresholds": thresholds[0],
                                "targetThresholds": thresholds[1],
                                "metricsUtilization": metrics,
                            },
                        },
                        {"name": "RemoveFailedPods", "args": {"minPodLifetimeSeconds": 0}},
                    ],
                    "plugins": {
                        "balance": {"enabled": ["LowNodeUtilization"]},
                        "deschedule": {"enabled": ["RemoveFailedPods"]},
                    },
                }
            ],
        },
        REG,
    )


def cluster() -> ClusterSnapshot:
    # by requests every node is cold (3 x 100m of 4 cpu); by metrics n1 is hot
    pods = [pod(f"a{i}", "n1") for i in range(3)] + [pod("b0", "n2"), pod("c0", "n3")]
    failed = pod("failed", "n2")
    failed = msgspec.structs.replace(failed, status=msgspec.structs.replace(failed.status, phase="Failed"))
    return ClusterSnapshot(nodes=[node("n1"), node("n2"), node("n3")], pods=[*pods, failed])


KM_THRESHOLDS = ({"cpu": 20, "memory": 20}, {"cpu": 50, "memory": 50})


async def live_cycle(policy: Any, api: client.ApiClient) -> tuple[Any, list[str]]:
    loop = asyncio.get_running_loop()
    framework = Framework(policy, REG)
    usage = UsageMetrics.for_policy(policy, framework, api, loop)
    assert usage is not None
    stop = asyncio.Event()
    try:
        await usage.start(stop, sync_timeout=5)
        await usage.begin_cycle()
        snapshot = cluster()
        backend = ApiEvictionBackend(api, loop)
        result = await asyncio.to_thread(framework.run_cycle, snapshot, backend)
    finally:
        stop.set()
        await usage.close()
    return result, [r.name for r in result.evictions]


def test_lnu_cycle_evicts_from_the_node_hot_by_metrics() -> None:
    state = FakeCluster(
        nodes={
            "n1": {"cpu": "3400m", "memory": "2Gi"},  # 85% cpu
            "n2": {"cpu": "200m", "memory": "512Mi"},
            "n3": {"cpu": "100m", "memory": "512Mi"},
        },
        pods={("default", f"a{i}"): [{"cpu": "900m", "memory": "100Mi"}] for i in range(3)},
    )

    async def test() -> None:
        async with served(state) as (api, _):
            policy = live_policy(
                {"source": "KubernetesMetrics"}, [{"source": "KubernetesMetrics"}], KM_THRESHOLDS
            )
            result, evicted = await live_cycle(policy, api)
            # 3400m -> 2500m (62.5%) -> 1600m (40%, under the 50% target): two pods leave n1
            assert evicted == ["failed", "a0", "a1"]
            assert state.evicted == evicted
            assert all(r.node == "n1" for r in result.evictions if r.plugin == "LowNodeUtilization")
            assert all(run.error is None for run in result.plugin_runs)

    run(test)


def test_lnu_cycle_with_metrics_down_evicts_nothing_but_other_plugins_go_on() -> None:
    state = FakeCluster(nodes={"n1": {"cpu": "3400m", "memory": "2Gi"}}, metrics_status=503)

    async def test() -> None:
        async with served(state) as (api, _):
            policy = live_policy(
                {"source": "KubernetesMetrics"}, [{"source": "KubernetesMetrics"}], KM_THRESHOLDS
            )
            result, evicted = await live_cycle(policy, api)
            assert evicted == ["failed"]  # RemoveFailedPods
            (lnu,) = [r for r in result.plugin_runs if r.plugin == "LowNodeUtilization"]
            assert (
                lnu.error is not None and "no node metrics collected yet" in lnu.error and "503" in lnu.error
            )
            assert not lnu.crashed

    run(test)


def test_lnu_cycle_with_prometheus() -> None:
    state = FakeCluster(prometheus={"n1": 0.9, "n2": 0.1, "n3": 0.15})
    prom_metrics = {"source": "Prometheus", "prometheus": {"query": QUERY}}
    thresholds = ({"MetricResource": 20}, {"MetricResource": 50})

    async def test() -> None:
        async with served(state) as (api, host):
            providers = [
                {
                    "source": "Prometheus",
                    "prometheus": {
                        "url": f"{host}/prometheus",
                        "authToken": {"secretReference": {"namespace": "kube-system", "name": "prom-token"}},
                    },
                }
            ]
            policy = live_policy(prom_metrics, providers, thresholds)
            _, evicted = await live_cycle(policy, api)
            assert evicted == ["failed", "a0"]  # one pod per node: a query cannot tell a pod's usage
            state.prometheus_status = 503
            result, evicted = await live_cycle(policy, api)
            assert evicted == ["failed"]
            (lnu,) = [r for r in result.plugin_runs if r.plugin == "LowNodeUtilization"]
            assert lnu.error is not None and "503" in lnu.error

    run(test)
