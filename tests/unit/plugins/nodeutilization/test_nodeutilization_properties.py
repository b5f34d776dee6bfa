"""Properties of LowNodeUtilization and HighNodeUtilization on small random clusters.

- LowNodeUtilization only evicts from a node that was over-utilised, and only while that node is
  still above its target (some resource's usage above its capacity capped at the target);
- HighNodeUtilization only evicts from under-utilised nodes;
- neither ever exceeds the policy's per-node, per-namespace and total limits, nor
  ``evictionLimits.node``, and no pod is evicted twice.

The expectations are recomputed here from the pods' requests, independently of the plugin's model.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests import builders
from tests.unit.plugins.harness import run

from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.evictor import EvictionRecord

NAMESPACES = ("a", "b", "c")


@dataclass(frozen=True)
class PodSpec:
    name: str
    node: str
    cpu: int
    namespace: str
    priority: int | None


@dataclass(frozen=True)
class NodeSpec:
    name: str
    cpu: int
    pods: int
    unschedulable: bool


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[NodeSpec, ...]
    pods: tuple[PodSpec, ...]


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    count = draw(st.integers(2, 5))
    nodes = tuple(
        NodeSpec(
            f"n{i}",
            draw(st.sampled_from([1000, 2000, 4000])),
            draw(st.sampled_from([4, 8, 10])),
            draw(st.booleans()) if i > 0 else False,
        )
        for i in range(count)
    )
    pods = []
    for n in nodes:
        for j in range(draw(st.integers(0, 8))):
            pods.append(
                PodSpec(
                    f"{n.name}-p{j}",
                    n.name,
                    draw(st.sampled_from([0, 100, 250, 400, 500, 1000])),
                    draw(st.sampled_from(NAMESPACES)),
                    draw(st.none() | st.integers(0, 3)),
                )
            )
    return Cluster(nodes, tuple(pods))


def limits() -> st.SearchStrategy[int | None]:
    return st.none() | st.integers(0, 4)


@st.composite
def thresholds(draw: st.DrawFn, *, pair: bool) -> tuple[dict[str, float], dict[str, float]]:
    resources = draw(st.sampled_from([("cpu",), ("pods",), ("cpu", "pods")]))
    low: dict[str, float] = {}
    high: dict[str, float] = {}
    for r in resources:
        a = draw(st.integers(0, 100))
        b = draw(st.integers(0, 100)) if pair else 100
        low[r], high[r] = float(min(a, b)), float(max(a, b))
    return low, high


def build(cluster: Cluster) -> ClusterSnapshot:
    nodes = [
        builders.bare_node(
            n.name,
            unschedulable=n.unschedulable,
            ready=True,
            cpu=f"{n.cpu}m",
            memory="1Gi",
            pods=str(n.pods),
        )
        for n in cluster.nodes
    ]
    pods = [
        builders.pod(
            p.name, namespace=p.namespace, uid=p.name, node=p.node, cpu=f"{p.cpu}m", priority=p.priority
        )
        for p in cluster.pods
    ]
    return ClusterSnapshot(nodes=nodes, pods=pods)


def set_limits(lim: dict[str, int | None]) -> dict[str, int]:
    """The policy's limits that are set."""
    return {k: v for k, v in lim.items() if v is not None}


def percentages(cluster: Cluster) -> dict[str, dict[str, float]]:
    out = {}
    for n in cluster.nodes:
        on = [p for p in cluster.pods if p.node == n.name]
        cpu = sum(p.cpu for p in on)
        out[n.name] = {"cpu": float(cpu) / float(n.cpu) * 100, "pods": float(len(on)) / float(n.pods) * 100}
    return out


def check_limits(records: list[EvictionRecord], lim: dict[str, int | None], node_limit: int | None) -> None:
    keys = [(r.namespace, r.name) for r in records]
    assert len(keys) == len(set(keys)), "a pod was evicted twice"
    per_node = Counter(r.node for r in records)
    per_ns = Counter(r.namespace for r in records)
    if lim["maxNoOfPodsToEvictTotal"] is not None:
        assert len(records) <= lim["maxNoOfPodsToEvictTotal"]
    for cap in (lim["maxNoOfPodsToEvictPerNode"], node_limit):
        if cap is not None:
            assert all(c <= cap for c in per_node.values())
    if lim["maxNoOfPodsToEvictPerNamespace"] is not None:
        assert all(c <= lim["maxNoOfPodsToEvictPerNamespace"] for c in per_ns.values())


LIMITS = st.fixed_dictionaries(
    {
        "maxNoOfPodsToEvictPerNode": limits(),
        "maxNoOfPodsToEvictPerNamespace": limits(),
        "maxNoOfPodsToEvictTotal": limits(),
    }
)


def capped(cap: int, threshold: float | None) -> int:
    return cap if threshold is None else int(threshold * 0.01 * cap)


@settings(max_examples=200, deadline=None)
@given(
    cluster=clusters(),
    bounds=thresholds(pair=True),
    deviation=st.booleans(),
    lim=LIMITS,
    node_limit=limits(),
)
def test_lnu_evicts_only_from_nodes_above_their_target(
    cluster: Cluster,
    bounds: tuple[dict[str, float], dict[str, float]],
    deviation: bool,
    lim: dict[str, int | None],
    node_limit: int | None,
) -> None:
    low, high = bounds
    args: dict[str, Any] = {"thresholds": low, "targetThresholds": high, "useDeviationThresholds": deviation}
    if node_limit is not None:
        args["evictionLimits"] = {"node": node_limit}
    snapshot = build(cluster)  # the plugin is given every node, as upstream's tests do
    result = run(
        "LowNodeUtilization", args, snapshot=snapshot, plugin_nodes=snapshot.nodes, **set_limits(lim)
    )
    records = result.evictions
    check_limits(records, lim, node_limit)
    if not records:
        return

    pct = percentages(cluster)
    if deviation:
        mean = {r: sum(p[r] for p in pct.values()) / len(pct) for r in low}
        high = {r: min(max(mean[r] + high[r], 0.0), 100.0) for r in low}
    else:  # cpu and pods default to 100% (memory is never requested here)
        high = {"cpu": 100.0, "pods": 100.0, **high}
    nodes = {n.name: n for n in cluster.nodes}
    pods = {p.name: p for p in cluster.pods}
    usage = {
        n: {
            "cpu": sum(p.cpu for p in cluster.pods if p.node == n),
            "pods": sum(1 for p in cluster.pods if p.node == n),
        }
        for n in nodes
    }
    for record in records:
        node = nodes[record.node]
        assert any(pct[node.name][r] > limit for r, limit in high.items()), (
            f"{node.name} was not over-utilised"
        )
        now = usage[node.name]
        caps = {"cpu": capped(node.cpu, high.get("cpu")), "pods": capped(node.pods, high.get("pods"))}
        assert now["cpu"] > caps["cpu"] or now["pods"] > caps["pods"], (
            f"evicted {record.name} from {node.name} at {now}, not above its target {caps}"
        )
        now["cpu"] -= pods[record.name].cpu
        now["pods"] -= 1


@settings(max_examples=200, deadline=None)
@given(cluster=clusters(), bounds=thresholds(pair=False), lim=LIMITS)
def test_hnu_evicts_only_from_under_utilised_nodes(
    cluster: Cluster, bounds: tuple[dict[str, float], dict[str, float]], lim: dict[str, int | None]
) -> None:
    low, _ = bounds
    snapshot = build(cluster)
    result = run(
        "HighNodeUtilization",
        {"thresholds": low},
        snapshot=snapshot,
        plugin_nodes=snapshot.nodes,
        **set_limits(lim),
    )
    records = result.evictions
    check_limits(records, lim, None)
    pct = percentages(cluster)
    low = {"cpu": 100.0, "pods": 100.0, **low}  # cpu and pods default to 100%
    for record in records:
        assert all(pct[record.node][r] <= limit for r, limit in low.items())
    if records:
        receiving = [
            n
            for n in cluster.nodes
            if not n.unschedulable and any(pct[n.name][r] > t for r, t in low.items())
        ]
        assert receiving, "pods were evicted although no node could receive them"
