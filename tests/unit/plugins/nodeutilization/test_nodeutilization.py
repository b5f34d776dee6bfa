"""LowNodeUtilization and HighNodeUtilization: args validation through the policy loader, the
usage sources, and behaviour the upstream fixtures leave out."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders
from tests.unit.plugins.harness import evicted, framework, load, load_error, run

from desched.api.types import SKIP_POLICY_CHECKS
from desched.backends.simulated_eviction import SimulatedBackend
from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import PolicyError
from desched.framework.metrics import MetricsProviders
from desched.k8s.objects import Node, Pod
from desched.plugins._shared import spread_low_to_high_key
from desched.plugins.nodeutilization.args import HighNodeUtilizationArgs, LowNodeUtilizationArgs
from desched.plugins.nodeutilization.plugin import (
    DestinationTaints,
    LowNodeUtilization,
    capped_capacity,
    deviation_thresholds,
    is_above,
    is_below,
)
from desched.plugins.nodeutilization.usage import (
    METRIC_RESOURCE,
    MetricsUsage,
    PrometheusSample,
    PrometheusUsage,
    RequestedUsage,
    StaticNodeMetrics,
    StaticPrometheus,
    UsageError,
    node_capacity,
    usage_percentages,
)

LNU = "LowNodeUtilization"
HNU = "HighNodeUtilization"


def node(
    name: str,
    cpu: str = "4",
    pods: str = "10",
    *,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    extra: dict[str, str] | None = None,
) -> Node:
    return builders.bare_node(
        name,
        cpu=cpu,
        memory="4Gi",
        pods=pods,
        extra=extra,
        ready=True,
        unschedulable=unschedulable,
        taints=taints or [],
    )


def pod(
    name: str,
    node_name: str,
    cpu: str | None = "400m",
    *,
    ns: str = "default",
    priority: int | None = None,
    tolerations: list[dict[str, str]] | None = None,
    requests: dict[str, str] | None = None,
    phase: str = "Running",
) -> Pod:
    return builders.pod(
        name,
        namespace=ns,
        node=node_name,
        uid=f"{ns}-{name}",
        owner=("ReplicaSet", "rs"),
        controller=None,
        cpu=cpu,
        requests=requests,
        priority=priority,
        tolerations=tolerations or [],
        phase=phase,
    )


LNU_ARGS: dict[str, Any] = {
    "thresholds": {"cpu": 30, "pods": 30},
    "targetThresholds": {"cpu": 50, "pods": 50},
}


# ------------------------------------------------------------------------------ args validation


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"thresholds": {}, "targetThresholds": {"cpu": 50}},
            "args.thresholds: no resource threshold is configured",
        ),
        (
            {"thresholds": {"cpu": 120}, "targetThresholds": {"cpu": 150}},
            "args.thresholds.cpu: must be between 0 and 100, got 120",
        ),
        (
            {"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": -1}},
            "args.targetThresholds.cpu: must be between 0 and 100, got -1",
        ),
        (
            {"thresholds": {"cpu": 10}, "targetThresholds": {"memory": 50}},
            "args.targetThresholds.cpu: missing: thresholds and targetThresholds must name the same "
            "resources (got thresholds: cpu, targetThresholds: memory)",
        ),
        (
            {"thresholds": {"cpu": 10, "pods": 5}, "targetThresholds": {"cpu": 50}},
            "args.targetThresholds.pods: missing: thresholds and targetThresholds must name the same "
            "resources (got thresholds: cpu, pods, targetThresholds: cpu)",
        ),
        (
            {"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 50, "pods": 60}},
            "args.thresholds.pods: missing: thresholds and targetThresholds must name the same "
            "resources (got thresholds: cpu, targetThresholds: cpu, pods)",
        ),
        (
            {"thresholds": {"cpu": 60}, "targetThresholds": {"cpu": 50}},
            "args.thresholds.cpu: must not be above targetThresholds.cpu (got 60 > 50)",
        ),
        (
            {**LNU_ARGS, "evictableNamespaces": {"include": ["a"]}},
            "args.evictableNamespaces.include: not supported, only exclude may be set (got include=['a'])",
        ),
        (
            {**LNU_ARGS, "metricsUtilization": {"source": "KubernetesMetrics", "metricsServer": True}},
            "args.metricsUtilization.metricsServer: cannot be true with source: KubernetesMetrics "
            "(got metricsServer: true, source: KubernetesMetrics)",
        ),
        (
            {**LNU_ARGS, "metricsUtilization": {"source": "KubernetesMetrics", "prometheus": {"query": "q"}}},
            "args.metricsUtilization.prometheus: must not be set with source: KubernetesMetrics (got a "
            "prometheus block, source: KubernetesMetrics); it configures source: Prometheus",
        ),
        (
            {**LNU_ARGS, "metricsUtilization": {"source": "Prometheus"}},
            "args.metricsUtilization.prometheus.query: required with source: Prometheus (or "
            "prometheus.queries, one per resource); got none",
        ),
        (
            {**LNU_ARGS, "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": "q"}}},
            "args.thresholds: must name only MetricResource with a Prometheus query, got cpu, pods",
        ),
        (
            {**LNU_ARGS, "metricsUtilization": {"source": "Graphite"}},
            "args.metricsUtilization.source: must be KubernetesMetrics or Prometheus, got 'Graphite'",
        ),
        (
            {**LNU_ARGS, "metricsUtilization": {}},
            "args.metricsUtilization.source: required: KubernetesMetrics or Prometheus (or the deprecated "
            "metricsServer: true), got none",
        ),
        (
            {
                **LNU_ARGS,
                "metricsUtilization": {
                    "source": "Prometheus",
                    "metricsServer": True,
                    "prometheus": {"query": "q"},
                },
            },
            "args.metricsUtilization.metricsServer: cannot be true with source: Prometheus",
        ),
        ({**LNU_ARGS, "evictionLimits": {"node": -1}}, "evictionLimits.node"),
        ({**LNU_ARGS, "treshold": 1}, "unknown field"),
    ],
)
def test_lnu_args_rejected(args: dict[str, Any], message: str) -> None:
    err = load_error(LNU, args)
    assert message in err
    assert "pluginConfig[0].args" in err


def test_lnu_args_accepted_and_normalised() -> None:
    args = {
        "useDeviationThresholds": True,
        "thresholds": {"cpu": 60, "nvidia.com/gpu": 10},
        "targetThresholds": {"cpu": 10, "nvidia.com/gpu": 10},
        "numberOfNodes": 2,
        "evictableNamespaces": {"exclude": ["kube-system"]},
        "evictionLimits": {"node": 3},
        "metricsUtilization": {"metricsServer": True},
    }
    policy = load(LNU, args, metricsProviders=[{"source": "KubernetesMetrics"}])
    loaded = policy.profiles[0].args[LNU]
    assert isinstance(loaded, LowNodeUtilizationArgs)
    assert loaded.thresholds == {"cpu": 60.0, "nvidia.com/gpu": 10.0}
    assert loaded.metrics_utilization is not None
    assert loaded.metrics_utilization.effective_source == "KubernetesMetrics"
    dumped = policy.normalised()["profiles"][0]["pluginConfig"][0]["args"]
    assert dumped["targetThresholds"] == {"cpu": 10.0, "nvidia.com/gpu": 10.0}
    assert dumped["evictableNamespaces"] == {"exclude": ["kube-system"]}


def test_prometheus_args_accepted() -> None:
    args = {
        "thresholds": {METRIC_RESOURCE: 30},
        "targetThresholds": {METRIC_RESOURCE: 50},
        "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": "instance:node_cpu:rate:sum"}},
    }
    loaded = (
        load(
            LNU,
            args,
            metricsProviders=[{"source": "Prometheus", "prometheus": {"url": "http://prometheus:9090"}}],
        )
        .profiles[0]
        .args[LNU]
    )
    assert isinstance(loaded, LowNodeUtilizationArgs)
    assert (
        loaded.metrics_utilization is not None
        and loaded.metrics_utilization.query == "instance:node_cpu:rate:sum"
    )


@pytest.mark.parametrize(
    ("metrics", "top", "missing"),
    [
        ({"source": "KubernetesMetrics"}, {}, "KubernetesMetrics"),
        (
            {"metricsServer": True},
            {"metricsProviders": [{"source": "Prometheus", "prometheus": {"url": "http://u"}}]},
            "KubernetesMetrics",
        ),
        (
            {"source": "Prometheus", "prometheus": {"query": "q"}},
            {"metricsProviders": [{"source": "KubernetesMetrics"}]},
            "Prometheus",
        ),
    ],
)
def test_lnu_metrics_source_needs_a_metrics_provider(
    metrics: dict[str, Any], top: dict[str, Any], missing: str
) -> None:
    args: dict[str, Any] = {**LNU_ARGS, "metricsUtilization": metrics}
    if missing == "Prometheus":
        args = {
            "thresholds": {METRIC_RESOURCE: 30},
            "targetThresholds": {METRIC_RESOURCE: 50},
            "metricsUtilization": metrics,
        }
    with pytest.raises(PolicyError) as e:
        load(LNU, args, **top)
    assert e.value.path == "profiles[0].pluginConfig[0].args.metricsUtilization"
    assert f"metricsProviders configures no {missing} provider" in str(e.value)


def test_deprecated_metrics_collector_enables_kubernetes_metrics() -> None:
    args = {**LNU_ARGS, "metricsUtilization": {"source": "KubernetesMetrics"}}
    policy = load(LNU, args, metricsCollector={"enabled": True})
    loaded = policy.profiles[0].args[LNU]
    assert isinstance(loaded, LowNodeUtilizationArgs)
    assert loaded.metrics_utilization is not None
    assert loaded.metrics_utilization.effective_source == "KubernetesMetrics"
    assert policy.metrics_providers == ()  # the deprecated switch stands in for the provider
    # without the switch the same args name the missing provider
    assert "metricsProviders configures no KubernetesMetrics provider" in load_error(LNU, args)


def test_lnu_enabled_without_config_is_an_error() -> None:
    assert "has no pluginConfig" in load_error(LNU, None, configured=False)


def test_upstream_test_construction_skips_policy_checks() -> None:
    # upstream's unit tests hand the plugin an `include` list; only policy loading refuses it
    raw = {**LNU_ARGS, "evictableNamespaces": {"include": ["default"]}}
    args = LowNodeUtilizationArgs.model_validate(raw, context={SKIP_POLICY_CHECKS: True})
    assert args.evictable_namespaces is not None and args.evictable_namespaces.include == ["default"]
    with pytest.raises(ValueError, match="only exclude may be set"):
        LowNodeUtilizationArgs.model_validate(raw)
    # what upstream's constructor checks still applies
    prom = {**LNU_ARGS, "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": "q"}}}
    with pytest.raises(ValueError, match="MetricResource"):
        LowNodeUtilizationArgs.model_validate(prom, context={SKIP_POLICY_CHECKS: True})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "args.thresholds: no resource threshold is configured (got {})"),
        ({"thresholds": {"cpu": 101}}, "args.thresholds.cpu: must be between 0 and 100, got 101"),
        (
            {"thresholds": {"cpu": 20}, "evictableNamespaces": {"include": ["a"]}},
            "args.evictableNamespaces.include: not supported, only exclude may be set (got include=['a'])",
        ),
        (
            {"thresholds": {"cpu": 20}, "evictionModes": ["Everything"]},
            "args.evictionModes[0]: must be one of OnlyThresholdingResources, got 'Everything'",
        ),
        ({"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}}, "unknown field"),
    ],
)
def test_hnu_args_rejected(args: dict[str, Any], message: str) -> None:
    assert message in load_error(HNU, args)


def test_hnu_args_accepted() -> None:
    args = {"thresholds": {"cpu": 20, "example.com/foo": 40}, "evictionModes": ["OnlyThresholdingResources"]}
    loaded = load(HNU, args).profiles[0].args[HNU]
    assert isinstance(loaded, HighNodeUtilizationArgs)
    assert loaded.eviction_modes == ["OnlyThresholdingResources"]


# ------------------------------------------------------------------------------ the model


def test_percentages_and_capacity() -> None:
    n = node("n", cpu="2", extra={"nvidia.com/gpu": "4"})
    cap = node_capacity(n)
    assert cap["cpu"] == 2000 and cap["nvidia.com/gpu"] == 4 and cap[METRIC_RESOURCE] == 100
    pct = usage_percentages({"cpu": 500, "nvidia.com/gpu": 1, "example.com/foo": 3}, cap)
    assert pct == {"cpu": 25.0, "nvidia.com/gpu": 25.0}  # no capacity: left out, reads 0%
    assert usage_percentages({"cpu": 5}, {"cpu": 0}) == {"cpu": 0.0}
    no_alloc = builders.bare_node("x", status={"capacity": {"cpu": "1"}})
    assert node_capacity(no_alloc)["cpu"] == 1000


def test_classification_is_inclusive_below_and_strict_above() -> None:
    assert is_below({"cpu": 30.0}, {"cpu": 30.0})
    assert not is_below({"cpu": 30.000001}, {"cpu": 30.0})
    assert not is_above({"cpu": 50.0}, {"cpu": 50.0})
    assert is_above({"cpu": 50.000001, "pods": 0.0}, {"cpu": 50.0, "pods": 50.0})
    assert is_below({}, {"nvidia.com/gpu": 0.0})  # a resource the node lacks reads 0%


def test_deviation_thresholds_average_only_nodes_offering_the_resource() -> None:
    low, high = deviation_thresholds(
        [{"cpu": 10.0, "gpu": 50.0}, {"cpu": 30.0}, {"cpu": 98.0}], {"cpu": 5.0, "gpu": 60.0}, {"cpu": 5.0}
    )
    assert low == {"cpu": 41.0, "gpu": 0.0}  # clamped at 0
    assert high == {"cpu": 51.0, "gpu": 50.0}


def test_capped_capacity() -> None:
    cap = {"cpu": 4000, "memory": 3000, "pods": 10}
    out = capped_capacity(cap, {"cpu": 50.0, "pods": 33.0}, ["cpu", "memory", "pods", "nvidia.com/gpu"])
    assert out == {"cpu": 2000, "memory": 3000, "pods": 3, "nvidia.com/gpu": 0}


def test_destination_taints() -> None:
    two = [
        {"key": "a", "value": "1", "effect": "NoSchedule"},
        {"key": "b", "value": "", "effect": "PreferNoSchedule"},
    ]
    taints = DestinationTaints([node("t", taints=two)])
    assert not taints.tolerated_by(pod("p", "x"))
    assert not taints.tolerated_by(
        pod("p", "x", tolerations=[{"key": "a", "value": "1", "effect": "NoSchedule"}])
    )
    # one wildcard toleration tolerates both taints (upstream's count rule would refuse it)
    assert taints.tolerated_by(pod("p", "x", tolerations=[{"operator": "Exists"}]))
    assert DestinationTaints([node("t", taints=two), node("u")]).tolerated_by(pod("p", "x"))
    assert not DestinationTaints([]).tolerated_by(pod("p", "x"))


# ------------------------------------------------------------------------------ usage sources


def test_requested_usage_counts_occupying_pods_only() -> None:
    pods = [pod("a", "n1", "500m"), pod("b", "n1", "250m", requests={"nvidia.com/gpu": "1"})]
    pods.append(pod("done", "n1", "1", phase="Succeeded"))
    snapshot = ClusterSnapshot(nodes=[node("n1")], pods=pods)
    source = RequestedUsage(["nvidia.com/gpu"])
    source.sync(snapshot, snapshot.nodes)
    assert source.node_usage("n1") == {"cpu": 750, "memory": 0, "pods": 2, "nvidia.com/gpu": 1}
    assert [p.name for p in source.pods("n1")] == ["a", "b"]
    assert source.pod_usage(pods[1]) == {"cpu": 250, "memory": 0, "nvidia.com/gpu": 1}


def test_metrics_usage() -> None:
    metrics = StaticNodeMetrics.from_objects(
        [
            {"kind": "NodeMetrics", "metadata": {"name": "n1"}, "usage": {"cpu": "1200m", "memory": "1Gi"}},
            {
                "kind": "PodMetrics",
                "metadata": {"name": "a", "namespace": "default"},
                "containers": [{"usage": {"cpu": "100m", "memory": "1Mi"}}, {"usage": {"cpu": "50m"}}],
            },
        ]
    )
    snapshot = ClusterSnapshot(nodes=[node("n1"), node("n2")], pods=[pod("a", "n1"), pod("b", "n1")])
    source = MetricsUsage([], metrics)
    with pytest.raises(UsageError, match="unable to find node 'n2' in the collected metrics"):
        source.sync(snapshot, snapshot.nodes)
    source.sync(snapshot, snapshot.nodes[:1])
    assert source.node_usage("n1") == {"cpu": 1200, "memory": 1 << 30, "pods": 2}
    assert source.pod_usage(snapshot.pods[0]) == {"cpu": 150, "memory": 1 << 20}
    with pytest.raises(Exception, match="podmetrics"):
        source.pod_usage(snapshot.pods[1])
    with pytest.raises(UsageError, match=r"'nvidia\.com/gpu' resource"):
        MetricsUsage(["nvidia.com/gpu"], metrics).sync(snapshot, snapshot.nodes[:1])


def test_prometheus_usage() -> None:
    answers = [
        {
            "query": "q",
            "resultType": "vector",
            "result": [
                {"metric": {"instance": "n1"}, "value": [1.0, "0.57"]},
                {"metric": {"instance": "n2"}, "value": [1.0, "0.2"]},
            ],
        }
    ]
    snapshot = ClusterSnapshot(nodes=[node("n1"), node("n2")], pods=[pod("a", "n1")])
    source = PrometheusUsage({METRIC_RESOURCE: "q"}, StaticPrometheus.from_api_results(answers))
    source.sync(snapshot, snapshot.nodes)
    assert source.node_usage("n1") == {METRIC_RESOURCE: 56}  # 0.57 * 100 truncates to 56, as upstream
    assert source.pod_usage(snapshot.pods[0]) is None
    for samples, message in (
        ([PrometheusSample({}, 0.1)], "missing 'instance'"),
        ([PrometheusSample({"instance": "n1"}, 1.5)], "outside of <0; 1> interval"),
        ([PrometheusSample({"instance": "n1"}, 0.5)], "unable to find metric entry for n2"),
    ):
        with pytest.raises(UsageError, match=message):
            PrometheusUsage({METRIC_RESOURCE: "q"}, StaticPrometheus({"q": samples})).sync(
                snapshot, snapshot.nodes
            )
    with pytest.raises(UsageError, match="no result for query"):
        PrometheusUsage({METRIC_RESOURCE: "other"}, StaticPrometheus({"q": []})).sync(
            snapshot, snapshot.nodes
        )


def test_prometheus_usage_one_query_per_resource() -> None:
    def samples(**by_node: float) -> list[PrometheusSample]:
        return [PrometheusSample({"instance": n}, v) for n, v in by_node.items()]

    snapshot = ClusterSnapshot(nodes=[node("n1"), node("n2")], pods=[pod("a", "n1")])
    answers = StaticPrometheus(
        {
            "cpu_q": samples(n1=0.57, n2=0.2),
            "mem_q": samples(n1=0.3, n2=1.25),
            "io_q": samples(n1=0.0, n2=0.9),
        }
    )
    source = PrometheusUsage(
        {"cpu": "cpu_q", "memory": "mem_q", "example.com/io": "io_q"}, answers, per_resource=True
    )
    source.sync(snapshot, snapshot.nodes)
    n1 = node("n1")
    pct = usage_percentages(source.node_usage("n1"), source.capacity(n1))
    # each query's value, as a percentage, not truncated (upstream's one query truncates)
    assert pct == pytest.approx({"cpu": 57.0, "memory": 30.0, "example.com/io": 0.0})
    # a node may use more than its allocatable
    assert usage_percentages(source.node_usage("n2"), source.capacity(node("n2")))["memory"] == 125.0
    assert source.pod_usage(snapshot.pods[0]) is None
    for bad, message in (
        (StaticPrometheus({"cpu_q": samples(n1=0.5)}), "unable to find cpu metric entry for n2"),
        (StaticPrometheus({"cpu_q": samples(n1=-0.1, n2=0.1)}), "cpu metrics sample for 'n1' has value -0.1"),
        (
            StaticPrometheus({"cpu_q": [PrometheusSample({}, 0.1)]}),
            "cpu metrics sample is missing 'instance'",
        ),
    ):
        with pytest.raises(UsageError, match=message):
            PrometheusUsage({"cpu": "cpu_q"}, bad, per_resource=True).sync(snapshot, snapshot.nodes)


# ------------------------------------------------------------------------------ LowNodeUtilization


def three_nodes() -> list[Node]:
    return [node("n1"), node("n2"), node("n3")]


def busy_n1(count: int = 6, **kw: Any) -> list[Pod]:
    return [pod(f"p{i}", "n1", **kw) for i in range(count)]


def test_lnu_evicts_until_the_node_is_under_its_target() -> None:
    # n1: 7 x 400m = 70% cpu, 7/10 pods; target 50%: at 5 pods (50%) it is no longer above it
    result = run(LNU, LNU_ARGS, three_nodes(), [*busy_n1(7), pod("q", "n2")])
    assert evicted(result) == ["p0", "p1"]
    assert all(r.plugin == LNU and "over-utilized" in r.reason for r in result.evictions)


def test_lnu_evicts_lowest_priority_and_best_effort_first() -> None:
    pods = [pod("high", "n1", priority=100), pod("low", "n1", priority=1), pod("none", "n1")]
    pods += [pod("be", "n1", cpu=None, priority=1), *[pod(f"f{i}", "n1", priority=500) for i in range(3)]]
    result = run(LNU, LNU_ARGS, three_nodes(), pods)
    assert evicted(result) == ["none", "be"]


def test_lnu_spreads_equal_pods_over_their_workloads() -> None:
    # issue 24 classes 1 and 2: among pods of equal priority and QoS upstream takes them in Go map
    # order, a mix of the node's workloads. In name order the four large "big" replicas would all
    # go before any "small" one and the node would be under its target after two evictions
    # (3200m - 2 x 600m = 2000m = 50%); spread, the evictions alternate as a random order does on
    # average, and take three (2600m, 2400m, 1800m).
    def replica(name: str, owner: str, cpu: str) -> Pod:
        return builders.pod(name, node="n1", uid=name, owner=("ReplicaSet", owner), cpu=cpu, phase="Running")

    pods = [replica(f"big-{i}", "big", "600m") for i in range(4)]
    pods += [replica(f"small-{i}", "small", "200m") for i in range(4)]
    args = {"thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 50}}
    assert evicted(run(LNU, args, three_nodes(), pods)) == ["big-0", "small-0", "big-1"]


def test_spread_key_spaces_each_owners_pods_in_proportion() -> None:
    def replica(name: str, owner: str | None, priority: int = 0) -> Pod:
        return builders.pod(
            name, node="n1", uid=name, owner=("ReplicaSet", owner) if owner else None, priority=priority
        )

    pods = [replica(f"a{i}", "a") for i in range(4)] + [replica(f"b{i}", "b") for i in range(2)]
    pods += [replica("lone", None), replica("z-first", "z", priority=-1)]
    key = spread_low_to_high_key(pods)
    # a: 1/8 3/8 5/8 7/8; b: 1/4 3/4; a pod without an owner: 1/2; a lower priority before all
    order = [p.metadata.name for p in sorted(pods, key=key)]
    assert order == ["z-first", "a0", "b0", "a1", "lone", "a2", "b1", "a3"]


def test_lnu_usage_equal_to_target_is_not_over() -> None:
    pods = busy_n1(5)  # exactly 50% cpu and 50% pods
    assert evicted(run(LNU, LNU_ARGS, three_nodes(), pods)) == []


def test_lnu_needs_more_under_utilised_nodes_than_number_of_nodes() -> None:
    args = {**LNU_ARGS, "numberOfNodes": 2}
    assert evicted(run(LNU, args, three_nodes(), busy_n1())) == []
    args = {**LNU_ARGS, "numberOfNodes": 1}
    assert len(evicted(run(LNU, args, three_nodes(), busy_n1()))) == 1


def test_lnu_cordoned_node_is_no_destination_but_can_be_a_source() -> None:
    nodes = [node("n1", unschedulable=True), node("n2"), node("n3", unschedulable=True)]
    assert evicted(run(LNU, LNU_ARGS, nodes, busy_n1())) == ["p0"]
    nodes = [node("n1"), node("n2", unschedulable=True), node("n3", unschedulable=True)]
    assert evicted(run(LNU, LNU_ARGS, nodes, busy_n1())) == []


def test_lnu_stops_when_destination_capacity_is_used_up() -> None:
    # destinations n2, n3 (1 cpu each) use 45%: together 2 x (500m - 450m) = 100m can move in, so
    # after one pod (400m) the budget is spent although n1 (70% -> 60%) is still above its target
    nodes = [node("n1"), node("n2", cpu="1"), node("n3", cpu="1")]
    pods = [*busy_n1(7), pod("d2", "n2", "450m"), pod("d3", "n3", "450m")]
    args = {"thresholds": {"cpu": 49}, "targetThresholds": {"cpu": 50}}
    assert evicted(run(LNU, args, nodes, pods)) == ["p0"]


def test_lnu_basic_resources_default_to_100_percent() -> None:
    # only cpu is configured, but n1 holds 5 pods where 4 fit: over-utilised by pods
    nodes = [node("n1", pods="4"), node("n2"), node("n3")]
    pods = [pod(f"p{i}", "n1", "0") for i in range(5)]
    args = {"thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 50}}
    assert evicted(run(LNU, args, nodes, pods)) == ["p0"]
    # ...and such a node is no HighNodeUtilization source either
    pods.append(pod("q", "n2", "3"))
    assert evicted(run(HNU, {"thresholds": {"cpu": 30}}, nodes, pods)) == []


def test_lnu_extended_resource() -> None:
    gpu = {"nvidia.com/gpu": "4"}
    nodes = [node("n1", extra=gpu), node("n2", extra=gpu), node("n3", extra=gpu)]
    pods = [pod(f"g{i}", "n1", cpu="0", requests={"nvidia.com/gpu": "1"}) for i in range(4)]
    args = {"thresholds": {"nvidia.com/gpu": 30}, "targetThresholds": {"nvidia.com/gpu": 50}}
    # 4/4 gpus = 100%: evict down to 2/4 = 50% (not above target)
    assert evicted(run(LNU, args, nodes, pods)) == ["g0", "g1"]


def test_lnu_deviation_thresholds() -> None:
    pods = [*busy_n1(6), pod("a", "n2"), pod("b", "n2"), pod("c", "n3")]
    args = {"useDeviationThresholds": True, "thresholds": {"cpu": 5}, "targetThresholds": {"cpu": 5}}
    # cpu: 60%, 20%, 10% -> mean 30%; over above 35%, under at most 25%
    result = run(LNU, args, three_nodes(), pods)
    assert evicted(result) == ["p0", "p1", "p2"]  # 60% -> 48% -> 36% -> 24%


def test_lnu_excluded_namespaces_count_but_are_not_evicted() -> None:
    pods = [pod(f"s{i}", "n1", ns="kube-system") for i in range(4)] + busy_n1(3)
    args = {**LNU_ARGS, "evictableNamespaces": {"exclude": ["kube-system"]}}
    assert evicted(run(LNU, args, three_nodes(), pods)) == ["p0", "p1"]


def test_lnu_eviction_limit_per_node() -> None:
    nodes = [node("n1"), node("n2"), node("n3"), node("n4")]
    pods = busy_n1(9) + [pod(f"m{i}", "n2") for i in range(9)]
    args = {**LNU_ARGS, "evictionLimits": {"node": 1}}
    assert sorted(evicted(run(LNU, args, nodes, pods))) == ["m0", "p0"]


def test_lnu_policy_limits_apply() -> None:
    nodes = [node("n1"), node("n2"), node("n3"), node("n4")]
    pods = busy_n1(9) + [pod(f"m{i}", "n2") for i in range(9)]
    assert len(evicted(run(LNU, LNU_ARGS, nodes, pods, maxNoOfPodsToEvictTotal=3))) == 3
    result = run(LNU, LNU_ARGS, nodes, pods, maxNoOfPodsToEvictPerNode=2)
    assert sorted(evicted(result)) == ["m0", "m1", "p0", "p1"]


def test_lnu_skips_pods_that_tolerate_no_destination() -> None:
    taint = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    nodes = [node("n1"), node("n2", taints=taint), node("n3", taints=taint)]
    tol = [{"key": "dedicated", "operator": "Exists"}]
    pods = [*busy_n1(5), pod("tolerant", "n1", tolerations=tol)]
    assert evicted(run(LNU, LNU_ARGS, nodes, pods)) == ["tolerant"]


def test_lnu_default_evictor_filters_candidates() -> None:
    bare = builders.pod("bare", uid="bare", node="n1", cpu="400m")
    snapshot = ClusterSnapshot(nodes=three_nodes(), pods=[bare, *busy_n1(6)])
    fw = framework(LNU, LNU_ARGS, evictor=True)
    result = fw.run_cycle(snapshot, SimulatedBackend(snapshot))
    assert "bare" not in evicted(result)
    assert len(evicted(result)) == 2


def test_lnu_metrics_without_a_provider_reports_an_error() -> None:
    args = {**LNU_ARGS, "metricsUtilization": {"source": "KubernetesMetrics"}}
    result = run(
        LNU,
        args,
        three_nodes(),
        busy_n1(),
        metricsProviders=[{"source": "KubernetesMetrics"}],
        errors_ok=True,
    )
    assert evicted(result) == []
    (run_,) = result.plugin_runs
    assert run_.error is not None and "metrics client not initialized" in run_.error and not run_.crashed


def test_lnu_kubernetes_metrics() -> None:
    usage = {"n1": "3", "n2": "100m", "n3": "100m"}
    objects: list[dict[str, Any]] = [
        {"kind": "NodeMetrics", "metadata": {"name": n}, "usage": {"cpu": cpu, "memory": "0"}}
        for n, cpu in usage.items()
    ]
    # p0 has no PodMetrics: skipped; each other pod uses 1 cpu
    objects += [
        {
            "kind": "PodMetrics",
            "metadata": {"name": f"p{i}", "namespace": "default"},
            "containers": [{"usage": {"cpu": "1", "memory": "0"}}],
        }
        for i in range(1, 3)
    ]
    args = {**LNU_ARGS, "metricsUtilization": {"source": "KubernetesMetrics"}}
    fw = framework(LNU, args, metricsProviders=[{"source": "KubernetesMetrics"}])
    assert isinstance(fw.profiles[0].instances[LNU], LowNodeUtilization)
    fw.use_metrics(MetricsProviders(node_metrics=StaticNodeMetrics.from_objects(objects)))
    snapshot = ClusterSnapshot(nodes=three_nodes(), pods=busy_n1(3))
    result = fw.run_cycle(snapshot, SimulatedBackend(snapshot))
    # 3 cpu of 4 = 75% -> p1 (2 cpu, 50%: no longer above target)
    assert evicted(result) == ["p1"]


def test_lnu_prometheus_evicts_one_pod_per_node_unless_limited() -> None:
    args: dict[str, Any] = {
        "thresholds": {METRIC_RESOURCE: 30},
        "targetThresholds": {METRIC_RESOURCE: 50},
        "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": "q"}},
    }
    samples = {
        "q": [PrometheusSample({"instance": n}, v) for n, v in (("n1", 0.9), ("n2", 0.8), ("n3", 0.1))]
    }
    pods = busy_n1(3) + [pod(f"m{i}", "n2") for i in range(3)]
    for extra, expected in (({}, ["p0", "m0"]), ({"evictionLimits": {"node": 2}}, ["p0", "p1", "m0", "m1"])):
        fw = framework(
            LNU,
            {**args, **extra},
            metricsProviders=[{"source": "Prometheus", "prometheus": {"url": "http://prometheus:9090"}}],
        )
        assert isinstance(fw.profiles[0].instances[LNU], LowNodeUtilization)
        fw.use_metrics(MetricsProviders(prometheus=StaticPrometheus(samples)))
        snapshot = ClusterSnapshot(nodes=three_nodes(), pods=pods)
        assert evicted(fw.run_cycle(snapshot, SimulatedBackend(snapshot))) == expected


# ------------------------------------------------------------------------------ HighNodeUtilization


def test_hnu_packs_pods_off_the_least_used_nodes() -> None:
    pods = [pod("a", "n1", "1"), pod("b", "n2", "200m"), pod("c", "n3", "100m"), pod("d", "n3", "100m")]
    pods += [pod(f"busy{i}", "n4", "1") for i in range(3)]
    nodes = [*three_nodes(), node("n4")]
    result = run(HNU, {"thresholds": {"cpu": 20}}, nodes, pods)
    # under 20% cpu: n2 (5%), n3 (5%); ties by name; n1 (25%) and n4 (75%) receive
    assert evicted(result) == ["b", "c", "d"]
    assert all("under-utilized" in r.reason for r in result.evictions)


def test_hnu_unschedulable_nodes_receive_nothing() -> None:
    pods = [pod("a", "n1", "100m"), pod("b", "n2", "2"), pod("c", "n3", "2")]
    nodes = [node("n1"), node("n2", unschedulable=True), node("n3", unschedulable=True)]
    assert evicted(run(HNU, {"thresholds": {"cpu": 20}}, nodes, pods)) == []
    nodes = [node("n1"), node("n2"), node("n3", unschedulable=True)]
    assert evicted(run(HNU, {"thresholds": {"cpu": 20}}, nodes, pods)) == ["a"]


def test_hnu_only_thresholding_resources() -> None:
    gpu = {"example.com/foo": "4"}
    nodes = [node("n1", extra=gpu), node("n2", extra=gpu), node("n3", extra=gpu)]
    pods = [pod("plain", "n1", "100m"), pod("foo", "n1", "100m", requests={"example.com/foo": "1"})]
    pods += [pod(f"x{i}", "n2", "1", requests={"example.com/foo": "1"}) for i in range(2)]
    args: dict[str, Any] = {"thresholds": {"example.com/foo": 40}}
    assert evicted(run(HNU, args, nodes, pods)) == ["foo", "plain"]
    args["evictionModes"] = ["OnlyThresholdingResources"]
    assert evicted(run(HNU, args, nodes, pods)) == ["foo"]


def test_lnu_only_thresholding_resources() -> None:
    gpu = {"example.com/foo": "4"}
    nodes = [node("n1", extra=gpu), node("n2", extra=gpu), node("n3", extra=gpu)]
    pods = [
        pod("a-plain", "n1", "0"),
        *[pod(f"f{i}", "n1", "0", requests={"example.com/foo": "1"}) for i in range(3)],
    ]
    args: dict[str, Any] = {
        "thresholds": {"example.com/foo": 30},
        "targetThresholds": {"example.com/foo": 50},
    }
    assert evicted(run(LNU, args, nodes, pods)) == ["a-plain", "f0"]  # a-plain frees no foo
    args["evictionModes"] = ["OnlyThresholdingResources"]
    assert evicted(run(LNU, args, nodes, pods)) == ["f0"]
    assert "args.evictionModes[0]: must be one of OnlyThresholdingResources, got 'X'" in load_error(
        LNU, {**LNU_ARGS, "evictionModes": ["X"]}
    )


def test_hnu_number_of_nodes_and_all_under() -> None:
    pods = [pod("a", "n1", "100m"), pod("b", "n2", "100m"), pod("c", "n3", "3")]
    assert evicted(run(HNU, {"thresholds": {"cpu": 20}, "numberOfNodes": 2}, three_nodes(), pods)) == []
    assert evicted(run(HNU, {"thresholds": {"cpu": 20}, "numberOfNodes": 1}, three_nodes(), pods)) == [
        "a",
        "b",
    ]
    pods = [pod("a", "n1", "100m"), pod("b", "n2", "100m")]
    assert evicted(run(HNU, {"thresholds": {"cpu": 20}}, three_nodes(), pods)) == []
