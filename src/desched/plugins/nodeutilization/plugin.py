"""LowNodeUtilization and HighNodeUtilization: balance nodes by how much of them is in use.

Both plugins share one model (upstream ``pkg/framework/plugins/nodeutilization``):

1. **Usage.** A :class:`~desched.plugins.nodeutilization.usage.UsageSource` gives each node's usage in integer
   amounts: by default the sum of the requests of the pods occupying it (``pods`` = their number);
   LowNodeUtilization can read actual usage from metrics.k8s.io or Prometheus instead
   (``metricsUtilization``). The resources looked at are ``cpu``, ``memory``, ``pods`` and every
   resource a threshold names (e.g. ``nvidia.com/gpu``); with Prometheus only ``MetricResource``.
2. **Percentages.** Usage over allocatable (capacity if a node reports no allocatable), times 100,
   as float64. A node without a resource reads 0% of it; a node offering none of it too.
3. **Classification.** A node is *under-utilised* when every threshold resource is at or below its
   ``thresholds`` value (``<=``), and *over-utilised* when some resource is strictly above its
   ``targetThresholds`` value (``>``); under is decided first. ``cpu``, ``memory`` and ``pods``
   default to 100% when the thresholds leave them out (so they only matter for a node whose
   requests exceed its allocatable); other resources count only when named. With
   ``useDeviationThresholds`` the thresholds are distances from the mean percentage over the
   nodes (each resource averaged over the nodes that offer it; only the named resources): under
   means <= mean - thresholds, over means > mean + targetThresholds, both clamped to [0, 100].
   With Prometheus only ``MetricResource`` is classified.
4. **Capacity to move into.** Each node's capacity capped at its high threshold
   (``int(threshold * 0.01 * capacity)``; uncapped for a resource without a threshold, zero for a
   resource the node does not have) minus its usage, summed over the destination nodes: the
   budget every eviction spends from.
5. **Eviction.** Source nodes are taken in order of the sum of their raw usage amounts (largest
   first for LowNodeUtilization, smallest first for HighNodeUtilization; ties by node name). On
   each, the pods the profile's Filter lets go (with ``evictionModes: [OnlyThresholdingResources]``
   only those that request a threshold resource) are ordered by priority (lowest first), then
   BestEffort before Burstable before Guaranteed (the profile's Sort plugins first, if any);
   LowNodeUtilization spreads the remaining ties over the pods' workloads
   (:func:`~desched.plugins._shared.spread_low_to_high_key`). A pod
   is skipped when it tolerates the taints of no destination node, or when its namespace is in
   ``evictableNamespaces.exclude``. After each eviction its usage is taken off its node and off the
   budget. A node is left once the stop rule says so; every plugin stops once any resource of the
   budget is used up (<= 0). LowNodeUtilization also stops moving pods off a node as soon as the
   node is no longer above its target for any resource (usage > capped capacity), checked before
   the first eviction and after each; ``evictionLimits.node`` caps the evictions per node.
   When the usage source cannot tell what one pod uses (Prometheus), at most one pod is evicted
   per node, or ``evictionLimits.node`` pods if that is set.

The plugin does nothing when no node is under-utilised, when the under-utilised nodes are not
more than ``numberOfNodes``, when all nodes are under-utilised, or when there is no node to move
pods from (LowNodeUtilization: none over-utilised) or to (HighNodeUtilization: no schedulable node
that is not under-utilised). HighNodeUtilization's ``compactWhenAllUnderutilized`` (desched only,
off by default) replaces "nothing" in the last two cases with emptying whole nodes
(:mod:`.compaction`). A cordoned node is never a LowNodeUtilization destination, and never
a HighNodeUtilization destination.

Deliberate differences from upstream v0.36: ties between nodes of equal usage and (HighNodeUtilization)
between pods of equal priority and QoS are broken by name instead of by Go's map order, and
LowNodeUtilization's ties between pods are spread over their workloads, as a random order mixes
them (in name order, large replicas of one workload all went first and a node reached its
target after fewer evictions than upstream makes in any run); a pod "tolerates a
destination" when every taint of that node is tolerated (upstream also requires the pod to have at
least as many tolerations as the node has taints, which wrongly rejects a single wildcard
toleration); LowNodeUtilization accepts ``evictionModes`` too, as newer upstream releases do.

With ``evictionPolicy.predictive`` each plugin judges where the placement model puts a pod's
replacement (a pod it leaves for that counts as moved, so no other pod is evicted in its stead):

- LowNodeUtilization: the replacement's node must not end above its target (usage > its
  capacity capped at ``targetThresholds``, as classified) once the pod's usage is added: its
  requests to the pods bound there in the model (the cycle's earlier replacements included, the
  terminating pods left out), or with ``metricsUtilization`` its measured usage to the node's at
  the cycle's start (with Prometheus, which cannot tell a pod's usage, any node will do). Skip
  reason ``predicted_over_utilized``.
- HighNodeUtilization: the replacement must not land on a node it empties: an under-utilised
  node (skip reason ``predicted_under_utilized``), or with ``compactWhenAllUnderutilized`` a
  node compaction emptied in this cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from desched.framework import (
    DOWNGRADE_ANNOTATION,
    KUBERNETES_METRICS,
    METHOD_TAINT,
    PROMETHEUS,
    ClusterView,
    Evictor,
    EvictResult,
    Handle,
    LiveInputs,
    NoGain,
    PredictedMove,
    Status,
    tie_preference,
)
from desched.k8s import nodes as k8s_nodes
from desched.k8s import pods as k8s_pods
from desched.k8s import taints as k8s_taints
from desched.k8s.namespaces import NamespaceRule, namespace_rule
from desched.k8s.objects import Node, Pod, Taint
from desched.k8s.resources import PODS, Resources
from desched.plugins._shared import priority_low_to_high_key, spread_low_to_high_key
from desched.plugins.nodeutilization.args import (
    MAX_PERCENTAGE,
    MIN_PERCENTAGE,
    ONLY_THRESHOLDING_RESOURCES,
    OVERUTILIZED_TAINT,
    UNDERUTILIZED_TAINT,
    HighNodeUtilizationArgs,
    LowNodeUtilizationArgs,
    ResourceThresholds,
    SoftTaintArgs,
)
from desched.plugins.nodeutilization.compaction import compact
from desched.plugins.nodeutilization.usage import (
    BASIC_RESOURCES,
    MetricsUsage,
    PodUsageError,
    PrometheusUsage,
    RequestedUsage,
    UsageError,
    UsageSource,
    usage_percentages,
)

log = logging.getLogger(__name__.rpartition(".")[0])  # the plugin's package: --vmodule names the folder


# ------------------------------------------------------------------------------------ the model


@dataclass(slots=True)
class NodeInfo:
    """A classified node: its usage (updated as pods leave) and its capacity capped at its high
    threshold."""

    node: Node
    usage: Resources
    available: Resources
    #: Why the node was classified so, with its numbers (``cpu 87% > 80%, memory 91% > 85%``).
    why: str = ""

    @property
    def name(self) -> str:
        return self.node.metadata.name


def _pct(value: float, limit: float) -> str:
    """``87``, ``80.4``, ``50.04``: a percentage as eviction reasons show it, with as few decimals
    as keep it on its side of ``limit`` (50.04 is not shown as 50 against a threshold of 50)."""
    above = value > limit
    for digits in (1, 2, 3, 4):
        text = f"{value:.{digits}f}"
        if (float(text) > limit) == above:
            return text.rstrip("0").rstrip(".") if "." in text else text
    return repr(value)


def _compared(percentages: dict[str, float], thresholds: ResourceThresholds, sign: str) -> str:
    """``cpu 87% > 80%, memory 91% > 85%``: the resources whose percentage is on the ``sign``
    side of its threshold (``>``: above it; ``<=``: every resource, each at or below)."""
    rows = []
    for name in sorted(thresholds):
        value, limit = percentages.get(name, 0.0), thresholds[name]
        if sign == "<=" or value > limit:
            rows.append(f"{name} {_pct(value, limit)}% {sign} {limit:g}%")
    return ", ".join(rows)


def _percents(percentages: dict[str, float], only: ResourceThresholds | None = None) -> str:
    """``cpu 62%, memory 40%`` (the threshold resources only, when given): for explanations."""
    keys = sorted(only) if only is not None else sorted(percentages)
    return ", ".join(f"{k} {percentages.get(k, 0.0):.0f}%" for k in keys)


def is_below(percentages: dict[str, float], thresholds: ResourceThresholds) -> bool:
    """Every threshold resource at or below its threshold (a missing percentage reads 0)."""
    return all(percentages.get(name, 0.0) <= limit for name, limit in thresholds.items())


def is_above(percentages: dict[str, float], thresholds: ResourceThresholds) -> bool:
    """Some threshold resource strictly above its threshold."""
    return any(percentages.get(name, 0.0) > limit for name, limit in thresholds.items())


def deviation_thresholds(
    percentages: Sequence[dict[str, float]], low_span: ResourceThresholds, high_span: ResourceThresholds
) -> tuple[ResourceThresholds, ResourceThresholds]:
    """(mean - low_span, mean + high_span), clamped to [0, 100], for each resource some node has."""
    total: dict[str, float] = {}
    count: dict[str, int] = {}
    for pct in percentages:
        for name, value in pct.items():
            total[name] = total.get(name, 0.0) + value
            count[name] = count.get(name, 0) + 1
    low: ResourceThresholds = {}
    high: ResourceThresholds = {}
    for name, value in total.items():
        mean = value / count[name]
        low[name] = _clamp(mean - low_span.get(name, 0.0))
        high[name] = _clamp(mean + high_span.get(name, 0.0))
    return low, high


def with_basic_defaults(thresholds: ResourceThresholds) -> ResourceThresholds:
    """``cpu``, ``memory`` and ``pods`` at 100% unless the thresholds name them."""
    out = dict.fromkeys(BASIC_RESOURCES, MAX_PERCENTAGE)
    out.update(thresholds)
    return out


def _clamp(value: float) -> float:
    return min(max(value, MIN_PERCENTAGE), MAX_PERCENTAGE)


def capped_capacity(capacity: Resources, thresholds: ResourceThresholds, names: Sequence[str]) -> Resources:
    """Each resource's capacity capped at its threshold (upstream ``capNodeCapacitiesToThreshold``)."""
    out: Resources = {}
    for name in names:
        amount = capacity.get(name)
        if amount is None:
            out[name] = 0
            continue
        threshold = thresholds.get(name)
        out[name] = amount if threshold is None else int(threshold * 0.01 * amount)
    return out


def usage_rank(usage: Resources) -> int:
    """The sum of a node's raw usage amounts (millicores, bytes, pods...), as upstream sorts by."""
    return sum(usage.values())


def is_above_target(info: NodeInfo) -> bool:
    """Some resource's usage exceeds the node's capped capacity."""
    available = info.available
    for name, used in info.usage.items():
        cap = available.get(name)
        if cap is not None and cap < used:
            return True
    return False


class DestinationTaints:
    """Whether a pod tolerates every taint of at least one destination node (any effect)."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        distinct: dict[tuple[tuple[str, str, str], ...], list[Taint]] = {}
        for node in nodes:
            taints = node.spec.taints or []
            distinct.setdefault(tuple((t.key, t.value, t.effect) for t in taints), taints)
        self._untainted = () in distinct
        self._taint_sets = list(distinct.values())

    def tolerated_by(self, pod: Pod) -> bool:
        if self._untainted:
            return True
        tolerations = pod.spec.tolerations
        if not tolerations:
            return False
        return any(all(k8s_taints.tolerates_taint(tolerations, t) for t in ts) for ts in self._taint_sets)


def requests_any(pod: Pod, names: Sequence[str]) -> bool:
    """Some container or init container requests one of ``names`` (even a zero amount)."""
    spec = pod.spec
    for container in (*spec.containers, *(spec.init_containers or ())):
        requests = container.resources.requests if container.resources is not None else None
        if requests and any(name in requests for name in names):
            return True
    return False


KeepGoing = Callable[[NodeInfo, Resources], bool]


def _bound_requests(cluster: ClusterView, node_name: str, names: Sequence[str]) -> Resources:
    """What the pods bound to the node request (``pods``: their number), terminating ones left out."""
    usage: Resources = dict.fromkeys(names, 0)
    count = 0
    for pod in cluster.pods_on_node(node_name):
        if not k8s_pods.occupies_node(pod) or k8s_pods.is_terminating(pod):
            continue
        count += 1
        for name, amount in cluster.requests(pod).items():
            if name in usage:
                usage[name] += amount
    usage[PODS] = count
    return usage


def _unique(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


class _NodeUtilization:
    """What LowNodeUtilization and HighNodeUtilization share: assessing nodes, and evicting."""

    handle: Handle
    _threshold_names: tuple[str, ...]
    _resource_names: tuple[str, ...]
    _namespace_rule: NamespaceRule | None
    _node_limit: int | None = None
    _only_thresholding: bool = False

    def _assess(
        self, source: UsageSource, nodes: Sequence[Node]
    ) -> tuple[dict[str, Resources], dict[str, Resources]] | Status:
        try:
            source.sync(self.handle.snapshot, nodes)
        except UsageError as e:
            return Status(f"error getting node usage: {e}")
        usages = {n.metadata.name: source.node_usage(n.metadata.name) for n in nodes}
        capacities = {n.metadata.name: source.capacity(n) for n in nodes}
        return usages, capacities

    def _soft_taint(
        self, soft: SoftTaintArgs | None, default_key: str, nodes: Sequence[Node], tainted: dict[str, str]
    ) -> bool:
        """``softTaint``: taint the nodes of ``tainted`` (name -> why), remove desched's own taint
        from the other ``nodes`` (the plugin's nodes) that carry it. True: evict nothing (taintOnly)."""
        if soft is None:
            return False
        key = soft.key or default_key
        actions = self.handle.node_actions
        for node in nodes:
            name = node.metadata.name
            why = tainted.get(name)
            if why is not None:
                actions.downgrade(
                    node,
                    method=METHOD_TAINT,
                    key=key,
                    value="",
                    ttl=soft.ttl_duration,
                    reason=f"{type(self).__name__} softTaint: {why}",
                    effect=soft.effect,
                )
            elif DOWNGRADE_ANNOTATION in (node.metadata.annotations or {}):
                actions.release(
                    node,
                    method=METHOD_TAINT,
                    key=key,
                    reason=f"{type(self).__name__} softTaint: the node no longer qualifies",
                    effect=soft.effect,
                )
        return soft.taint_only

    def _pod_filter(self, ev: Evictor, pod: Pod) -> bool:
        if self._only_thresholding and not requests_any(pod, self._threshold_names):
            return False
        return ev.filter(pod)

    def _evict(
        self,
        source: UsageSource,
        sources: Sequence[NodeInfo],
        destinations: Sequence[NodeInfo],
        keep_going: KeepGoing,
        reason: Callable[[NodeInfo], str],
    ) -> None:
        budget: Resources = {}
        for dest in destinations:
            for name in self._resource_names:
                if name not in dest.usage:
                    log.warning(
                        "%s: unable to find %s resource in node %s usage, terminating eviction",
                        type(self).__name__,
                        name,
                        dest.name,
                    )
                    return
                budget[name] = budget.get(name, 0) + dest.available.get(name, 0) - dest.usage[name]
        log.debug("%s: total capacity to be moved: %s", type(self).__name__, budget)
        taints = DestinationTaints([d.node for d in destinations])
        ev = self.handle.evictor
        for info in sources:
            pods = source.pods(info.name)
            if not pods:
                continue
            # Sorted first and filtered as the loop reaches them: the same candidates in the same
            # order (the sort key tells every pod apart), without filtering the many pods left
            # behind once the node is done. (Filters only turn a pod down as evictions go on.)
            ordered = self._order(pods)
            if not self._evict_from_node(ev, source, info, ordered, budget, taints, keep_going, reason(info)):
                return

    def _order(self, pods: Sequence[Pod]) -> list[Pod]:
        """A source node's pods in eviction order (the profile's Sort plugins first)."""
        return self.handle.sort_pods(pods, key=priority_low_to_high_key)

    def _evict_from_node(
        self,
        ev: Evictor,
        source: UsageSource,
        info: NodeInfo,
        pods: Sequence[Pod],
        budget: Resources,
        taints: DestinationTaints,
        keep_going: KeepGoing,
        reason: str,
    ) -> bool:
        """Evict pods of one node (those the filters accept) until the stop rule holds. False
        when the total limit is reached."""
        if not keep_going(info, budget):
            return True
        node_limit = self._node_limit
        allowed = self._namespace_rule
        evicted = 0
        for pod in pods:
            if node_limit is not None and evicted >= node_limit:
                break
            if not self._pod_filter(ev, pod):
                continue
            if not taints.tolerated_by(pod):
                continue
            if allowed is not None and not allowed(pod.metadata.namespace):
                continue
            try:
                freed = source.pod_usage(pod)
            except PodUsageError as e:
                log.info("%s: not evicting %s: %s", type(self).__name__, pod.key, e)
                continue
            result = ev.evict(pod, reason=reason)
            if result is EvictResult.NODE_LIMIT:
                return True
            if result is EvictResult.TOTAL_LIMIT:
                return False
            # a pod ``predictive`` left because its move would not help is counted as moved:
            # no other pod goes in its stead (predictive evicts a part of the plain plan)
            if not result.planned:
                continue
            if freed is None:
                # The source cannot tell what the pod frees: one pod per node, or up to the limit.
                if node_limit is None:
                    break
                evicted += 1
                continue
            evicted += 1
            usage = info.usage
            for name in budget:
                amount = 1 if name == PODS else freed.get(name, 0)
                usage[name] = usage.get(name, 0) - amount
                budget[name] -= amount
            if not keep_going(info, budget):
                break
        return True


def budget_left(_info: NodeInfo, budget: Resources) -> bool:
    """Every resource of the destinations' budget is still positive."""
    return all(amount > 0 for amount in budget.values())


# ------------------------------------------------------------------------------ the two plugins


class LowNodeUtilization(_NodeUtilization):
    """Move pods off over-utilised nodes so that they land on under-utilised ones."""

    name: ClassVar[str] = "LowNodeUtilization"
    Args: ClassVar[type[LowNodeUtilizationArgs]] = LowNodeUtilizationArgs

    def __init__(self, args: LowNodeUtilizationArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._threshold_names = tuple(args.thresholds)
        metrics = args.metrics_utilization
        self._metrics_source = metrics.effective_source if metrics is not None else None
        if self._metrics_source == PROMETHEUS:
            self._resource_names = self._threshold_names
        else:
            self._resource_names = _unique([*self._threshold_names, *BASIC_RESOURCES])
        # (``include`` is refused by validation: only ``exclude`` counts)
        self._namespace_rule = namespace_rule(
            None, args.evictable_namespaces.exclude if args.evictable_namespaces else None
        )
        self._node_limit = args.eviction_limits.node if args.eviction_limits is not None else None
        self._only_thresholding = ONLY_THRESHOLDING_RESOURCES in (args.eviction_modes or ())
        self._requested = RequestedUsage(self._resource_names)
        #: this cycle's usage source and high thresholds (for :meth:`judge_move`)
        self._cycle: tuple[UsageSource, ResourceThresholds] | None = None

    def live_inputs(self) -> LiveInputs:
        """The Prometheus query of ``metricsUtilization``, when Prometheus is its source."""
        metrics = self.args.metrics_utilization
        if metrics is not None and self._metrics_source == PROMETHEUS:
            return LiveInputs(prometheus_queries=tuple(metrics.queries_by_resource.values()))
        return LiveInputs()

    def _order(self, pods: Sequence[Pod]) -> list[Pod]:
        """Priority and QoS as upstream, their ties spread over the workloads
        (:func:`~desched.plugins._shared.spread_low_to_high_key`): upstream's random order
        takes a mix of the node's workloads, and how many evictions bring a node under its
        target depends on that mix."""
        return self.handle.sort_pods(pods, key=spread_low_to_high_key(pods))

    def usage_source(self) -> UsageSource | Status:
        """Where this cycle's usage comes from."""
        if self._metrics_source is None:
            return self._requested
        if self._metrics_source == KUBERNETES_METRICS:
            node_metrics = self.handle.metrics.node_metrics
            if node_metrics is None:
                return Status("metrics client not initialized: no metrics.k8s.io provider is available")
            return MetricsUsage(self._resource_names, node_metrics)
        prometheus = self.handle.metrics.prometheus
        if prometheus is None:
            return Status("prometheus client not initialized: no Prometheus provider is available")
        metrics = self.args.metrics_utilization
        if metrics is None:  # (the source is Prometheus only with metricsUtilization)
            return Status("metricsUtilization is not configured")
        return PrometheusUsage(metrics.queries_by_resource, prometheus, per_resource=metrics.per_resource)

    def on_cycle_end(self) -> None:
        """Let go of the cycle's usage source and the snapshot it reads."""
        self._cycle = None
        self._requested = RequestedUsage(self._resource_names)

    def balance(self, nodes: Sequence[Node]) -> Status | None:
        self._cycle = None
        source = self.usage_source()
        if isinstance(source, Status):
            return source
        assessed = self._assess(source, nodes)
        if isinstance(assessed, Status):
            return assessed
        usages, capacities = assessed
        args = self.args
        if args.use_deviation_thresholds:
            names = self._threshold_names
            percentages = {
                name: usage_percentages({r: u[r] for r in names if r in u}, capacities[name])
                for name, u in usages.items()
            }
            low, high = deviation_thresholds(
                list(percentages.values()), args.thresholds, args.target_thresholds
            )
        else:
            percentages = {name: usage_percentages(u, capacities[name]) for name, u in usages.items()}
            low, high = args.thresholds, args.target_thresholds
            if self._metrics_source != PROMETHEUS:
                low, high = with_basic_defaults(low), with_basic_defaults(high)

        under: list[NodeInfo] = []
        over: list[NodeInfo] = []
        findings = self.handle.findings
        for node in nodes:
            name = node.metadata.name
            pct = percentages[name]
            why = ""
            if not k8s_nodes.is_node_unschedulable(node) and is_below(pct, low):
                group = under
                if findings.enabled:
                    findings.node_left(
                        name, f"node under-utilised ({_percents(pct, low)} <= thresholds {_percents(low)})"
                    )
            elif is_above(pct, high):
                group = over
                why = _compared(pct, high, ">")
            else:
                if findings.enabled:
                    findings.node_left(
                        name, f"node not over target ({_percents(pct, high)}, targets {_percents(high)})"
                    )
                continue
            group.append(
                NodeInfo(
                    node, usages[name], capped_capacity(capacities[name], high, self._resource_names), why
                )
            )
        log.debug(
            "LowNodeUtilization: %d under-utilised nodes (%s), %d over-utilised nodes (%s)",
            len(under),
            low,
            len(over),
            high,
        )
        if self._soft_taint(
            args.soft_taint,
            OVERUTILIZED_TAINT,
            nodes,
            {i.name: f"node is over-utilized: {i.why}" for i in over},
        ):
            return None
        idle = ""
        if not under:
            idle = "no node is under-utilised; you might tune the thresholds"
        elif len(under) <= args.number_of_nodes:
            idle = f"{len(under)} under-utilised nodes <= numberOfNodes {args.number_of_nodes}"
        elif len(under) == len(nodes):
            idle = "all nodes are under-utilised"
        elif not over:
            idle = "no node is above its target utilisation"
        if idle:
            log.debug("LowNodeUtilization: %s", idle)
            if findings.enabled:
                findings.node_left("", f"nothing to do: {idle}")
            return None

        over.sort(key=lambda i: (-usage_rank(i.usage), i.name))
        self._cycle = (source, high)
        self._evict(source, over, under, self._keep_going, self._reason)
        return None

    def judge_move(self, move: PredictedMove) -> NoGain | None:
        """The replacement's node must not end above its target once the pod is on it."""
        if self._cycle is None:
            return None
        source, high = self._cycle
        target = move.destination
        name = target.metadata.name
        try:
            freed = source.pod_usage(move.pod)
        except PodUsageError:
            return None
        if freed is None:
            return None  # (Prometheus: a pod's usage is unknown)
        if isinstance(source, RequestedUsage):
            usage = _bound_requests(move.cluster, name, source.resource_names)
        else:
            usage = source.node_usage(name)
        after = {r: usage.get(r, 0) + (1 if r == PODS else freed.get(r, 0)) for r in self._resource_names}
        capped = capped_capacity(source.capacity(target), high, self._resource_names)
        over = [r for r, used in after.items() if capped.get(r, 0) < used]
        if not over:
            return None
        pct = usage_percentages(after, source.capacity(target))
        return NoGain(
            "predicted_over_utilized",
            f"its replacement would land on {name}, which would then be above its target "
            f"({_percents(pct, {r: high.get(r, 0.0) for r in over})}; targets "
            f"{_percents({r: high.get(r, 0.0) for r in over})})",
        )

    @staticmethod
    def _keep_going(info: NodeInfo, budget: Resources) -> bool:
        return is_above_target(info) and budget_left(info, budget)

    @staticmethod
    def _reason(info: NodeInfo) -> str:
        return f"node is over-utilized: {info.why}; moving pods to under-utilized nodes"


class HighNodeUtilization(_NodeUtilization):
    """Move pods off under-utilised nodes so that they pack onto the others (and the emptied nodes
    can be scaled down). Pair it with kube-scheduler's ``MostAllocated`` scoring."""

    name: ClassVar[str] = "HighNodeUtilization"
    Args: ClassVar[type[HighNodeUtilizationArgs]] = HighNodeUtilizationArgs

    def __init__(self, args: HighNodeUtilizationArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._threshold_names = tuple(args.thresholds)
        self._low = with_basic_defaults(args.thresholds)
        #: The model works with a low and a high threshold; here the high one is the whole node.
        self._high: ResourceThresholds = dict.fromkeys(self._low, MAX_PERCENTAGE)
        self._resource_names = _unique([*self._threshold_names, *BASIC_RESOURCES])
        # (``include`` is refused by validation: only ``exclude`` counts)
        self._namespace_rule = namespace_rule(
            None, args.evictable_namespaces.exclude if args.evictable_namespaces else None
        )
        self._only_thresholding = ONLY_THRESHOLDING_RESOURCES in (args.eviction_modes or ())
        self._requested = RequestedUsage(self._resource_names)
        #: the nodes this cycle's run empties (for :meth:`judge_move`)
        self._emptying: set[str] = set()

    def judge_move(self, move: PredictedMove) -> NoGain | None:
        """The replacement must not land on a node this plugin empties."""
        name = move.destination.metadata.name
        if name not in self._emptying:
            return None
        return NoGain(
            "predicted_under_utilized",
            f"its replacement would land on {name}, an under-utilised node this plugin empties",
        )

    def on_cycle_end(self) -> None:
        """Let go of the nodes this cycle emptied and the snapshot the usage source reads."""
        self._emptying = set()
        self._requested = RequestedUsage(self._resource_names)

    def balance(self, nodes: Sequence[Node]) -> Status | None:
        self._emptying = set()
        source = self._requested
        assessed = self._assess(source, nodes)
        if isinstance(assessed, Status):
            return assessed
        usages, capacities = assessed
        low = self._low
        under: list[NodeInfo] = []
        schedulable: list[NodeInfo] = []
        findings = self.handle.findings
        for node in nodes:
            name = node.metadata.name
            pct = usage_percentages(usages[name], capacities[name])
            why = ""
            if is_below(pct, low):
                group = under
                why = _compared(pct, low, "<=")
            elif not k8s_nodes.is_node_unschedulable(node):
                group = schedulable
                if findings.enabled:
                    findings.node_left(
                        name, f"node not under-utilised ({_percents(pct, low)}, thresholds {_percents(low)})"
                    )
            else:
                if findings.enabled:
                    findings.node_left(name, "node is cordoned and not under-utilised")
                continue
            group.append(
                NodeInfo(
                    node,
                    usages[name],
                    capped_capacity(capacities[name], self._high, self._resource_names),
                    why,
                )
            )
        log.debug("HighNodeUtilization: %d under-utilised nodes (%s)", len(under), low)
        idle = ""
        if not under:
            idle = "no node is under-utilised; you might tune the thresholds"
        elif len(under) <= self.args.number_of_nodes:
            idle = f"{len(under)} under-utilised nodes <= numberOfNodes {self.args.number_of_nodes}"
        elif len(under) == len(nodes):
            idle = "all nodes are under-utilised"
        elif not schedulable:
            idle = "no node is available to schedule the pods"
        # every schedulable node under-utilised: compact them, when asked to
        if (
            self.args.compact_when_all_underutilized
            and not schedulable
            and len(under) > self.args.number_of_nodes
        ):
            log.debug("HighNodeUtilization: %s: compacting them", idle)
            # of nodes with the same usage, the one kube-scheduler would bind to among equals
            # (MostAllocated ties) is kept and the other emptied: the other way round, the
            # replacements follow kube-scheduler back onto the node being emptied
            prefer = tie_preference(
                n for n in self.handle.snapshot.ready_nodes() if not k8s_nodes.is_node_unschedulable(n)
            )
            last = len(prefer)
            under.sort(key=lambda i: (usage_rank(i.usage), -prefer.get(i.name, last), i.name))
            compact(
                self.handle,
                [i.node for i in under],
                self._may_evict,
                partial(self._compaction_reason, {i.name: i.why for i in under}),
                emptied=self._emptying,
            )
            whys = {i.name: i.why for i in under}
            self._soft_taint(
                self.args.soft_taint,
                UNDERUTILIZED_TAINT,
                nodes,
                {n: f"node is being emptied: {whys.get(n, '')}" for n in self._emptying},
            )
            return None
        if idle:
            log.debug("HighNodeUtilization: %s", idle)
            if findings.enabled:
                findings.node_left("", f"nothing to do: {idle}")
            self._soft_taint(self.args.soft_taint, UNDERUTILIZED_TAINT, nodes, {})
            return None

        under.sort(key=lambda i: (usage_rank(i.usage), i.name))
        self._emptying = {i.name for i in under}
        if self._soft_taint(
            self.args.soft_taint,
            UNDERUTILIZED_TAINT,
            nodes,
            {i.name: f"node is being emptied: {i.why}" for i in under},
        ):
            return None
        self._evict(source, under, schedulable, budget_left, self._reason)
        return None

    @staticmethod
    def _reason(info: NodeInfo) -> str:
        return f"node is under-utilized: {info.why}; packing its pods onto other nodes"

    def _may_evict(self, pod: Pod) -> bool:
        allowed = self._namespace_rule
        if allowed is not None and not allowed(pod.metadata.namespace):
            return False
        return self._pod_filter(self.handle.evictor, pod)

    @staticmethod
    def _compaction_reason(whys: dict[str, str], node: Node) -> str:
        """``all nodes are under-utilized (this one: cpu 4% <= 20%, ...); emptying node n1, ...``."""
        name = node.metadata.name
        return (
            f"all nodes are under-utilized (this one: {whys.get(name, '')}); emptying node {name}, "
            "whose pods fit on the others"
        )


__all__ = ["HighNodeUtilization", "LowNodeUtilization", "NodeInfo"]


if TYPE_CHECKING:  # mypy checks the class against what it serves (upstream: var _ DeschedulePlugin = &X{})
    from desched.framework import BalancePlugin, CycleEndHook, DeclaresLiveInputs, JudgesMoves

    _low_balance_plugin: type[BalancePlugin] = LowNodeUtilization
    _low_cycle_end_hook: type[CycleEndHook] = LowNodeUtilization
    _low_declares_live_inputs: type[DeclaresLiveInputs] = LowNodeUtilization
    _low_judges_moves: type[JudgesMoves] = LowNodeUtilization
    _high_balance_plugin: type[BalancePlugin] = HighNodeUtilization
    _high_cycle_end_hook: type[CycleEndHook] = HighNodeUtilization
    _high_judges_moves: type[JudgesMoves] = HighNodeUtilization
