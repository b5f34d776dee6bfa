"""LowNodeUtilization with one Prometheus query per resource (``prometheus.queries``, upstream
#1833): the args' rules, the classification on every queried resource, and a live cycle against
a Prometheus HTTP API served on 127.0.0.1."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client
from tests import builders
from tests.unit.plugins import harness
from tests.unit.plugins.harness import REGISTRY, evicted, framework, load, load_error

from desched.api.policy import load_policy
from desched.backends.api_eviction import ApiEvictionBackend
from desched.backends.usage_metrics import UsageMetrics
from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.framework import Framework
from desched.framework.metrics import MetricsProviders
from desched.k8s.objects import Node, Pod
from desched.plugins.nodeutilization.args import LowNodeUtilizationArgs
from desched.plugins.nodeutilization.usage import PrometheusSample, StaticPrometheus

LNU = "LowNodeUtilization"
QUERIES = {"cpu": "node:cpu:ratio", "memory": "node:memory:ratio"}
PROVIDERS = [{"source": "Prometheus", "prometheus": {"url": "http://prometheus:9090"}}]
#: DefaultEvictor on, and a Prometheus metrics provider.
POLICY: dict[str, Any] = {"evictor": True, "metricsProviders": PROVIDERS}


def lnu_args(
    queries: dict[str, str] | None = None,
    low: dict[str, float] | None = None,
    high: dict[str, float] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "thresholds": {"cpu": 30, "memory": 30} if low is None else low,
        "targetThresholds": {"cpu": 60, "memory": 70} if high is None else high,
        "metricsUtilization": {
            "source": "Prometheus",
            "prometheus": {"queries": QUERIES if queries is None else queries},
        },
        **extra,
    }


# ---------------------------------------------------------------------------------- args


def test_queries_are_accepted_and_printed_back() -> None:
    policy = load(LNU, lnu_args(), **POLICY)
    loaded = policy.profiles[0].args[LNU]
    assert isinstance(loaded, LowNodeUtilizationArgs) and loaded.metrics_utilization is not None
    assert loaded.metrics_utilization.queries_by_resource == QUERIES
    assert loaded.metrics_utilization.per_resource
    dumped = policy.normalised()["profiles"][0]["pluginConfig"][0]["args"]
    # the form written, no empty `query` beside it; and what is printed loads again
    assert dumped["metricsUtilization"]["prometheus"] == {"queries": QUERIES}
    again = load_policy(policy.normalised(), REGISTRY).profiles[0].args[LNU]
    assert isinstance(again, LowNodeUtilizationArgs) and again.metrics_utilization is not None
    assert again.metrics_utilization.queries_by_resource == QUERIES


def test_a_single_query_is_printed_back_as_written() -> None:
    args = {**lnu_args(), "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": "q"}}}
    args["thresholds"] = {"MetricResource": 30}
    args["targetThresholds"] = {"MetricResource": 60}
    policy = load(LNU, args, **POLICY)
    dumped = policy.normalised()["profiles"][0]["pluginConfig"][0]["args"]
    assert dumped["metricsUtilization"]["prometheus"] == {"query": "q"}


@pytest.mark.parametrize(
    ("args", "where", "words"),
    [
        (
            {
                **lnu_args(),
                "metricsUtilization": {
                    "source": "Prometheus",
                    "prometheus": {"query": "q", "queries": QUERIES},
                },
            },
            "args.metricsUtilization.prometheus.queries",
            "query and queries are exclusive",
        ),
        (lnu_args(queries={}), "args.metricsUtilization.prometheus.queries", "at least one resource"),
        (
            lnu_args(queries={"cpu": " ", "memory": "m"}),
            "args.metricsUtilization.prometheus.queries.cpu",
            "must not be empty",
        ),
        (
            lnu_args(low={"cpu": 30}, high={"cpu": 60}),
            "args.thresholds",
            "must name exactly the resources of metricsUtilization.prometheus.queries "
            "['cpu', 'memory'], got ['cpu']",
        ),
        (
            lnu_args(low={"cpu": 30, "memory": 30}, high={"cpu": 60, "pods": 70}),
            "args.targetThresholds.memory",
            "missing: thresholds and targetThresholds must name the same resources "
            "(got thresholds: cpu, memory, targetThresholds: cpu, pods)",
        ),
        (
            lnu_args(low={"cpu": 30, "memory": 80}),
            "args.thresholds.memory",
            "must not be above targetThresholds.memory (got 80 > 70)",
        ),
    ],
)
def test_bad_queries_name_the_field(args: dict[str, Any], where: str, words: str) -> None:
    msg = load_error(LNU, args, **POLICY)
    assert f"profiles[0].pluginConfig[0].{where}" in msg and words in msg


# ------------------------------------------------------------------------- classification


def node(name: str) -> Node:
    return builders.node(name, hostname_label=False, cpu="4", memory="8Gi", pods="20")


def pod(name: str, on: str) -> Pod:
    return builders.pod(name, node=on, uid=name, owner=("ReplicaSet", "rs"), cpu="100m", memory="64Mi")


def samples(**by_node: float) -> list[PrometheusSample]:
    return [PrometheusSample({"instance": n}, v) for n, v in by_node.items()]


def cycle(answers: dict[str, list[PrometheusSample]], args: dict[str, Any]) -> list[str]:
    fw = framework(LNU, args, **POLICY)
    fw.use_metrics(MetricsProviders(prometheus=StaticPrometheus(answers)))
    pods = [pod(f"{n}-{i}", n) for n in ("n1", "n2", "n3") for i in range(3)]
    return evicted(harness.cycle(fw, [node("n1"), node("n2"), node("n3")], pods))


def test_each_resource_is_classified_on_its_own_query() -> None:
    # n1: cpu low but memory over its 70% target -> over-utilised by memory alone;
    # n2 is under both thresholds; n3 between
    answers = {
        "node:cpu:ratio": samples(n1=0.2, n2=0.1, n3=0.5),
        "node:memory:ratio": samples(n1=0.85, n2=0.2, n3=0.5),
    }
    assert cycle(answers, lnu_args()) == ["n1-0"]  # a query cannot tell a pod's usage: one per node
    assert cycle(answers, lnu_args(evictionLimits={"node": 2})) == ["n1-0", "n1-1"]
    # one combined query could not tell: memory 0.85 averaged with cpu 0.2 is under both targets
    answers["node:memory:ratio"] = samples(n1=0.69, n2=0.2, n3=0.5)  # 69% <= 70%: not over
    assert cycle(answers, lnu_args()) == []


def test_a_custom_resource_and_a_missing_node() -> None:
    queries = {"example.com/disk-io": "node:disk_io:ratio"}
    args = lnu_args(queries=queries, low={"example.com/disk-io": 20}, high={"example.com/disk-io": 50})
    answers = {"node:disk_io:ratio": samples(n1=0.1, n2=0.9, n3=0.3)}
    assert cycle(answers, args) == ["n2-0"]
    fw = framework(LNU, args, **POLICY)
    fw.use_metrics(MetricsProviders(prometheus=StaticPrometheus({"node:disk_io:ratio": samples(n1=0.1)})))
    (run,) = harness.cycle(fw, [node("n1"), node("n2")], [pod("a", "n1")], errors_ok=True).plugin_runs
    assert run.error is not None and "unable to find example.com/disk-io metric entry for n2" in run.error


def test_live_runs_ask_for_every_query() -> None:
    fw = framework(LNU, lnu_args(), **POLICY)
    assert set(fw.live_inputs().prometheus_queries) == set(QUERIES.values())


# ------------------------------------------------------------------- live, over HTTP


def test_live_cycle_runs_each_query_against_prometheus() -> None:
    answers = {
        "node:cpu:ratio": {"n1": 0.9, "n2": 0.1, "n3": 0.4},
        "node:memory:ratio": {"n1": 0.5, "n2": 0.15, "n3": 0.4},
    }
    asked: list[str] = []
    evicted: list[str] = []

    async def query(request: web.Request) -> web.Response:
        q = request.query["query"]
        asked.append(q)
        if q not in answers:
            return web.json_response(
                {"status": "error", "errorType": "bad_data", "error": "unknown"}, status=400
            )
        result = [{"metric": {"instance": n}, "value": [1700000000.0, str(v)]} for n, v in answers[q].items()]
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": result}})

    async def eviction(request: web.Request) -> web.Response:
        evicted.append(request.match_info["name"])
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    async def test() -> None:
        app = web.Application()
        app.router.add_get("/api/v1/query", query)
        app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/eviction", eviction)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        cfg = client.Configuration()
        cfg.host = str(server.make_url("")).rstrip("/")
        api = client.ApiClient(configuration=cfg)
        try:
            providers = [{"source": "Prometheus", "prometheus": {"url": cfg.host}}]
            policy = load(LNU, lnu_args(), evictor=True, metricsProviders=providers)
            framework = Framework(policy, REGISTRY)
            loop = asyncio.get_running_loop()
            usage = UsageMetrics.for_policy(policy, framework, api, loop)
            assert usage is not None
            try:
                await usage.start(asyncio.Event())
                await usage.begin_cycle()
                pods = [pod(f"{n}-{i}", n) for n in ("n1", "n2", "n3") for i in range(2)]
                snapshot = ClusterSnapshot(nodes=[node("n1"), node("n2"), node("n3")], pods=pods)
                result = await asyncio.to_thread(framework.run_cycle, snapshot, ApiEvictionBackend(api, loop))
            finally:
                await usage.close()
        finally:
            await api.close()
            await server.close()
        assert all(r.error is None for r in result.plugin_runs), result.plugin_runs
        # n1's cpu (90%) is over its 60% target; n2 is under both 30% thresholds
        assert [e.name for e in result.evictions] == ["n1-0"] == evicted
        assert sorted(set(asked)) == sorted(QUERIES.values())

    asyncio.run(test())
