"""How much of each node is in use: the node-usage model of LowNodeUtilization and HighNodeUtilization.

A :class:`UsageSource` answers three questions for one cycle, after :meth:`UsageSource.sync`:

- the usage of a node, in canonical integer amounts per resource (millicores for ``cpu``,
  ``Quantity.Value()`` for the rest, as :mod:`desched.k8s.resources`), where ``pods`` is the
  number of pods occupying the node;
- the pods occupying a node (bound to it and not finished: Succeeded and Failed pods hold nothing);
- the usage of one pod, i.e. what evicting it frees on its node.

Three sources, as upstream's usage clients (``nodeutilization/usageclients.go``):

- :class:`RequestedUsage`, the default: the pods' resource requests, summed per node from the
  snapshot's per-node totals (no per-pod work unless a pod is about to be evicted);
- :class:`MetricsUsage`: actual usage from ``metrics.k8s.io`` (NodeMetrics for nodes, PodMetrics
  for pods, read through a :class:`NodeMetricsProvider`);
- :class:`PrometheusUsage`: one instant query whose samples carry the node in the ``instance``
  label and a value in [0, 1]; the node's usage is the pseudo-resource ``MetricResource`` in
  percent (``int(value * 100)``, as upstream truncates). A query cannot say what one pod uses, so
  :meth:`PrometheusUsage.pod_usage` returns ``None`` ("not supported"). desched also takes one
  query per resource (``prometheus.queries``, upstream #1833): each resource's usage is its
  query's value (the fraction of the node in use) in millionths, over a capacity of a million, so
  its percentage is the value times 100 (not truncated to a whole percent); a value may exceed 1.

The providers are a seam: ``desched run`` plugs in live ones (:mod:`desched.backends.usage_metrics`,
fed on the event loop); :class:`StaticNodeMetrics` and :class:`StaticPrometheus` serve metrics
captured elsewhere (the conformance fixtures, tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from desched.framework import ClusterView, NodeMetricsProvider, PrometheusClient, PrometheusSample, UsageError
from desched.k8s import resources as k8s_resources
from desched.k8s.objects import Node, Pod
from desched.k8s.pods import occupies_node
from desched.k8s.quantity import QuantityError
from desched.k8s.resources import CPU, MEMORY, PODS, Resources

__all__ = [
    "BASIC_RESOURCES",
    "METRIC_RESOURCE",
    "MetricsUsage",
    "NodeMetricsProvider",
    "PodUsageError",
    "PrometheusClient",
    "PrometheusSample",
    "PrometheusUsage",
    "RequestedUsage",
    "StaticNodeMetrics",
    "StaticPrometheus",
    "UsageError",
    "UsageSource",
    "node_capacity",
    "occupies_node",
    "usage_percentages",
]

#: The pseudo-resource a Prometheus query's result is stored under (a percentage of 100).
METRIC_RESOURCE = "MetricResource"

#: Resources every node-utilization plugin tracks, whatever its thresholds name.
BASIC_RESOURCES = (CPU, MEMORY, PODS)


class PodUsageError(Exception):
    """The usage of one pod is unknown (no PodMetrics for it); the pod is not evicted."""


def node_capacity(node: Node) -> Resources:
    """What a node offers: status.allocatable (capacity if none), plus ``MetricResource`` = 100."""
    capacity = k8s_resources.node_allocatable(node)
    capacity[METRIC_RESOURCE] = 100
    return capacity


def usage_percentages(usage: Mapping[str, int], capacity: Mapping[str, int]) -> dict[str, float]:
    """Usage as a percentage of capacity, per resource the node has a capacity for.

    Computed exactly as upstream (``float64(used) / float64(capacity) * 100``; 0 for a zero
    capacity) so that a node on a threshold lands on the same side of it. A resource the node has
    no capacity for is left out (it then reads as 0% when classified).
    """
    out: dict[str, float] = {}
    for name, used in usage.items():
        total = capacity.get(name)
        if total is None:
            continue
        out[name] = float(used) / float(total) * 100 if total > 0 else 0.0
    return out


class UsageSource(Protocol):
    """Node and pod usage for one cycle (see the module docstring)."""

    def sync(self, snapshot: ClusterView, nodes: Sequence[Node]) -> None:
        """Take this cycle's picture of ``nodes``. Raises :class:`UsageError`."""
        ...

    def node_usage(self, node_name: str) -> Resources:
        """A fresh dict the caller may change."""
        ...

    def pods(self, node_name: str) -> list[Pod]:
        """The pods occupying the node, in the snapshot's order."""
        ...

    def pod_usage(self, pod: Pod) -> Resources | None:
        """What evicting ``pod`` frees; ``None`` if this source cannot tell. Raises
        :class:`PodUsageError` if it could tell but has no data for this pod."""
        ...

    def capacity(self, node: Node) -> Resources:
        """What the node's usage is a share of (:func:`node_capacity`, unless the source's
        amounts are shares of something else)."""
        ...


class _SnapshotPods:
    """The pods part every source shares: read from the cycle's snapshot, on demand."""

    def __init__(self) -> None:
        self._snapshot: ClusterView | None = None

    def _bind(self, snapshot: ClusterView) -> None:
        self._snapshot = snapshot

    def pods(self, node_name: str) -> list[Pod]:
        if self._snapshot is None:
            return []
        return [p for p in self._snapshot.pods_on_node(node_name) if occupies_node(p)]

    def capacity(self, node: Node) -> Resources:
        return node_capacity(node)


class RequestedUsage(_SnapshotPods):
    """Usage from resource requests, for the given resource names (cpu, memory, pods always)."""

    def __init__(self, resource_names: Iterable[str]) -> None:
        super().__init__()
        names = list(BASIC_RESOURCES)
        names.extend(n for n in resource_names if n not in names)
        self.resource_names: tuple[str, ...] = tuple(names)

    def sync(self, snapshot: ClusterView, nodes: Sequence[Node]) -> None:
        self._bind(snapshot)

    def node_usage(self, node_name: str) -> Resources:
        snapshot = self._snapshot
        if snapshot is None:
            return dict.fromkeys(self.resource_names, 0)
        requested = snapshot.requested_on(node_name)
        usage = {name: requested.get(name, 0) for name in self.resource_names}
        usage[PODS] = snapshot.pod_count_on(node_name)
        return usage

    def pod_usage(self, pod: Pod) -> Resources | None:
        snapshot = self._snapshot
        requests = snapshot.requests(pod) if snapshot is not None else k8s_resources.pod_requests(pod)
        return {name: requests.get(name, 0) for name in self.resource_names if name != PODS}


# ------------------------------------------------------------------------------------- metrics


class MetricsUsage(_SnapshotPods):
    """Usage from metrics.k8s.io (``metricsUtilization.source: KubernetesMetrics``)."""

    def __init__(self, resource_names: Iterable[str], provider: NodeMetricsProvider) -> None:
        super().__init__()
        names = list(BASIC_RESOURCES)
        names.extend(n for n in resource_names if n not in names)
        self.resource_names: tuple[str, ...] = tuple(names)
        self.provider = provider
        self._usage: dict[str, Resources] = {}

    def sync(self, snapshot: ClusterView, nodes: Sequence[Node]) -> None:
        self._bind(snapshot)
        collected = self.provider.node_usage()
        usage: dict[str, Resources] = {}
        for node in nodes:
            name = node.metadata.name
            metrics = collected.get(name)
            if metrics is None:
                raise UsageError(f"unable to find node {name!r} in the collected metrics")
            node_usage = dict(metrics)
            node_usage[PODS] = sum(1 for p in snapshot.pods_on_node(name) if occupies_node(p))
            for resource in self.resource_names:
                if resource not in node_usage:
                    raise UsageError(
                        f"unable to find {resource!r} resource for collected {name!r} node metric"
                    )
            usage[name] = node_usage
        self._usage = usage

    def node_usage(self, node_name: str) -> Resources:
        return dict(self._usage.get(node_name, {}))

    def pod_usage(self, pod: Pod) -> Resources | None:
        used = self.provider.pod_usage(pod.metadata.namespace, pod.metadata.name)
        if used is None:
            raise PodUsageError(f"unable to get podmetrics for {pod.key!r}")
        return {name: used[name] for name in self.resource_names if name in used}


#: The capacity of a resource measured by a per-resource query (its usage is in millionths).
PER_RESOURCE_SCALE = 1_000_000


class PrometheusUsage(_SnapshotPods):
    """Usage from Prometheus (``metricsUtilization.source: Prometheus``): upstream's one query
    (``queries`` is ``{MetricResource: query}``), or one query per resource (``per_resource``)."""

    def __init__(
        self, queries: Mapping[str, str], client: PrometheusClient, *, per_resource: bool = False
    ) -> None:
        super().__init__()
        self.queries = dict(queries)
        self.resource_names: tuple[str, ...] = tuple(self.queries)
        self.per_resource = per_resource
        self.client = client
        self._usage: dict[str, Resources] = {}

    def sync(self, snapshot: ClusterView, nodes: Sequence[Node]) -> None:
        self._bind(snapshot)
        by_node: dict[str, Resources] = {}
        for resource, query in self.queries.items():
            what = f"{resource} " if self.per_resource else ""
            for sample in self.client.query(query):
                node_name = sample.labels.get("instance")
                if node_name is None:
                    raise UsageError(f"the collected {what}metrics sample is missing 'instance' key")
                value = sample.value
                if self.per_resource:
                    if not 0 <= value < float("inf"):
                        raise UsageError(
                            f"the collected {what}metrics sample for {node_name!r} has value {value}, "
                            "not a fraction >= 0"
                        )
                    amount = round(value * PER_RESOURCE_SCALE)
                else:
                    if not 0 <= value <= 1:
                        raise UsageError(
                            f"the collected metrics sample for {node_name!r} has value {value} "
                            "outside of <0; 1> interval"
                        )
                    amount = int(value * 100)
                by_node.setdefault(node_name, {})[resource] = amount
        usage: dict[str, Resources] = {}
        for node in nodes:
            name = node.metadata.name
            found = by_node.get(name, {})
            for resource in self.queries:
                if resource not in found:
                    what = f"{resource} " if self.per_resource else ""
                    raise UsageError(f"unable to find {what}metric entry for {name}")
            usage[name] = found
        self._usage = usage

    def capacity(self, node: Node) -> Resources:
        if self.per_resource:
            return dict.fromkeys(self.queries, PER_RESOURCE_SCALE)
        return node_capacity(node)

    def node_usage(self, node_name: str) -> Resources:
        return dict(self._usage.get(node_name, {}))

    def pod_usage(self, pod: Pod) -> Resources | None:
        return None


# ------------------------------------------------------------------ captured metrics (no client)


def _amounts(usage: Mapping[str, Any] | None, what: str) -> Resources:
    try:
        return k8s_resources.resource_list(dict(usage) if usage else None)
    except QuantityError as e:
        raise UsageError(f"{what}: {e}") from None


class StaticNodeMetrics:
    """metrics.k8s.io data captured once: NodeMetrics and PodMetrics objects (their JSON)."""

    def __init__(self, nodes: Mapping[str, Resources], pods: Mapping[tuple[str, str], Resources]) -> None:
        self._nodes = dict(nodes)
        self._pods = dict(pods)

    @classmethod
    def from_objects(cls, objects: Iterable[Mapping[str, Any]]) -> StaticNodeMetrics:
        """Read ``NodeMetrics`` / ``PodMetrics`` objects as the metrics API returns them."""
        nodes: dict[str, Resources] = {}
        pods: dict[tuple[str, str], Resources] = {}
        for obj in objects:
            meta = obj.get("metadata") or {}
            name = str(meta.get("name", ""))
            if obj.get("kind") == "NodeMetrics":
                nodes[name] = _amounts(obj.get("usage"), f"NodeMetrics {name}")
            elif obj.get("kind") == "PodMetrics":
                key = (str(meta.get("namespace", "")), name)
                total = k8s_resources.sum_resources(
                    _amounts(c.get("usage"), f"PodMetrics {key[0]}/{name}")
                    for c in obj.get("containers") or ()
                )
                pods[key] = total
        return cls(nodes, pods)

    def node_usage(self) -> Mapping[str, Resources]:
        return self._nodes

    def pod_usage(self, namespace: str, name: str) -> Resources | None:
        return self._pods.get((namespace, name))


class StaticPrometheus:
    """Prometheus answers captured once, by query."""

    def __init__(self, results: Mapping[str, Sequence[PrometheusSample]]) -> None:
        self._results = dict(results)

    @classmethod
    def from_api_results(cls, entries: Iterable[Mapping[str, Any]]) -> StaticPrometheus:
        """Read ``{"query", "result": [{"metric": {...}, "value": [ts, "0.57"]}]}`` entries."""
        results: dict[str, list[PrometheusSample]] = {}
        for entry in entries:
            samples = []
            for item in entry.get("result") or ():
                value = item.get("value") or (0, "NaN")
                samples.append(PrometheusSample(dict(item.get("metric") or {}), float(value[1])))
            results[str(entry.get("query", ""))] = samples
        return cls(results)

    def query(self, query: str) -> Sequence[PrometheusSample]:
        if query not in self._results:
            raise UsageError(f"unable to capture prometheus metrics: no result for query {query!r}")
        return self._results[query]
