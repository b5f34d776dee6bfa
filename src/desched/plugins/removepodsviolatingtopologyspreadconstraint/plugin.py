"""RemovePodsViolatingTopologySpreadConstraint: evict the fewest pods that rebalance spread domains.

A pod's ``topologySpreadConstraints`` are enforced by kube-scheduler only when it places the pod;
scale-downs, node failures and new nodes leave domains skewed. For every constraint found in a
namespace this Balance plugin counts the matching pods per topology domain, and when the largest
and smallest domain differ by more than ``maxSkew`` it evicts as few pods as upstream's
``balanceDomains`` needs to bring them within it, so that kube-scheduler spreads them again.

Which constraints (upstream ``topologyspreadconstraint.go``):

- those of the pods bound to the given nodes, in the namespaces ``namespaces`` allows, whose
  ``whenUnsatisfiable`` is listed in ``constraints`` (default ``[DoNotSchedule]``);
- a constraint is taken with the pod that declares it, as kube-scheduler does: ``matchLabelKeys``
  are merged into its selector with the pod's values; with ``nodeAffinityPolicy: Honor`` (the
  default) only nodes matching the pod's nodeSelector and required node affinity are domains,
  with ``nodeTaintsPolicy: Honor`` (default ``Ignore``) only nodes whose NoSchedule/NoExecute
  taints the pod tolerates. Identical constraints of a namespace are balanced once.

Counting (as kube-scheduler counts, see "Differences" below): the pods of the namespace bound to an
eligible node that carries the topology key, that match the selector, are not terminating and have
not finished. Every eligible domain counts, also an empty one. ``minDomains`` (which upstream does
not support) follows kube-scheduler's definition: with fewer eligible domains than ``minDomains``
the global minimum is 0, which is modelled as ``minDomains - domains`` extra empty domains without
nodes. They lower the average the plan balances to, so that pods move to the existing domains
below it; only with ``topologyBalanceNodeFit`` (no pod is evicted that no node would take):
without it, ``minDomains`` is left out of the plan, as upstream leaves it out, since a pod
"moved" to a domain without nodes would be evicted to stay Pending.

Balancing (upstream's algorithm): with ``idealAvg = pods / domains`` and the domains sorted by size,
a pointer ``i`` walks up from the smallest and ``j`` down from the largest; while the two differ
by more than ``maxSkew``, ``min(ceil(size_j - idealAvg), ceil(idealAvg - size_i),
ceil((skew - maxSkew) / 2))`` pods move from ``j`` to ``i``. The pods taken from a domain are
chosen from the back of upstream's order: pods that cannot be evicted first (kept), then pods
with a nodeSelector or node affinity, then the others; by descending priority within each group
(the profile's Sort plugins order pods of equal standing; then the name, the last name leaves first).
Pods that fit somewhere better are preferred (upstream #1719), and with ``topologyBalanceNodeFit``
(default true) a pod is only evicted if it fits (node fit: ``handle.node_fit_failures``) one of
the eligible nodes, other than its own, of the domains below the ideal average. A pod that is
chosen but may not leave still counts as moved, so the plan never evicts more than needed.
``labelSelector`` is not used to count; it only decides which pods may be evicted.

Constraints of one namespace share pods, so they are planned together, in the order the pods
declare them: a pod planned to leave for one constraint is gone from the counts of the others,
and those constraints expect kube-scheduler to place it again in their smallest domains (so a
zone constraint's evictions do not make a hostname constraint evict more). No pod is chosen whose
departure would leave any constraint of its namespace more skewed than ``max(its skew before,
its maxSkew)``: evictions never create a violation, nor deepen one.

Evictions run after every namespace is planned, in plan order (after the profile's Sort plugins):
the per-node limit skips the rest of that node, the total limit ends the plugin. The promise above
is checked again against the evictions actually made, since the evictor may refuse planned ones.

Speed (150,000 pods, 5,000 nodes): pods are grouped by namespace in one pass, a namespace's pods
are indexed by label on first use so that a selector with an equality requirement only looks at
its candidates, a pod's constraints are built once per distinct set of records (replicas decoded
by the snapshot loader share theirs), domain counts are sparse (a hostname constraint of ten
replicas costs ten entries, not one per node), eligible nodes are computed once per (topology
key, node filter), and node fit is searched lazily over the candidate nodes, once per pod shape
rather than once per replica.

Differences from upstream, on purpose:

- upstream counts only the pods its evictor filter and the ``labelSelector`` accept, so pods it
  may not evict vanish from the domains (its sort for non-evictable pods is then dead code). desched
  counts every matching pod, as kube-scheduler and upstream's documentation do, and keeps the
  ones it may not evict; pods on ineligible nodes are not counted (upstream counted them into a
  domain of their node's label value);
- pods that are not evictable, or not selected by ``labelSelector``, are never chosen while an
  evictable one is available (upstream could choose them, and then evicted nothing);
- pods in ``Succeeded``/``Failed`` phase are not counted (kube-scheduler does not see them);
- within a domain the lowest priority leaves first, as upstream documents (its comparator
  inverted it), and ties are broken by name rather than Go's map and sort order;
- with ``topologyBalanceNodeFit``, a pod is also kept when every candidate node would break another
  of its ``DoNotSchedule`` constraints (kube-scheduler would refuse it there; upstream PR #1918,
  except that a node without the topology key is refused, as kube-scheduler does);
- constraints are planned together (above); upstream plans each on the original counts and can
  evict for one what breaks another;
- ``minDomains`` is honoured when ``topologyBalanceNodeFit`` is on (see "Counting").
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import Field, field_validator

from desched.api.types import ArgsModel, LabelSelectorArg, Namespaces
from desched.cluster.view import ClusterView
from desched.framework.types import Evictor, Handle, Status
from desched.k8s import affinity as k8s_affinity
from desched.k8s import labels as k8s_labels
from desched.k8s import taints as k8s_taints
from desched.k8s.namespaces import namespace_rule
from desched.k8s.objects import Node, Pod, TopologySpreadConstraint
from desched.plugins._shared import ContentKeys

log = logging.getLogger(__name__.rpartition(".")[0])  # the plugin's package: --vmodule names the folder

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
ALLOWED_CONSTRAINTS = (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)
HONOR = "Honor"
IGNORE = "Ignore"

_TAINT_EFFECTS = (k8s_taints.TAINT_NO_SCHEDULE, k8s_taints.TAINT_NO_EXECUTE)
_FINISHED_PHASES = ("Succeeded", "Failed")
_EQUALITY_OPS = (k8s_labels.OP_EQUALS, k8s_labels.OP_DOUBLE_EQUALS, k8s_labels.OP_IN)


class RemovePodsViolatingTopologySpreadConstraintArgs(ArgsModel):
    namespaces: Namespaces | None = None
    #: Only decides which of the chosen pods may be evicted; every pod counts in the domains.
    label_selector: LabelSelectorArg | None = None
    #: Which ``whenUnsatisfiable`` kinds to balance. ``null`` means the default.
    constraints: list[str] = Field(default_factory=lambda: [DO_NOT_SCHEDULE])
    #: Only evict a pod that fits a node of a domain below the ideal average. ``null``: true.
    topology_balance_node_fit: bool = True

    @field_validator("constraints", mode="before")
    @classmethod
    def _default_constraints(cls, value: Any) -> Any:
        return [DO_NOT_SCHEDULE] if value is None else value

    @field_validator("constraints")
    @classmethod
    def _known_constraints(cls, value: list[str]) -> list[str]:
        for c in value:
            if c not in ALLOWED_CONSTRAINTS:
                raise ValueError(
                    f"each constraint must be one of {', '.join(ALLOWED_CONSTRAINTS)}, got {c!r}"
                )
        return value

    @field_validator("topology_balance_node_fit", mode="before")
    @classmethod
    def _default_node_fit(cls, value: Any) -> Any:
        return True if value is None else value


# --------------------------------------------------------------------------- constraints


@dataclass(slots=True, eq=False)
class SpreadConstraint:
    """One topology spread constraint as kube-scheduler applies it to the pod that declares it."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    #: 1 unless set; only meaningful for DoNotSchedule constraints.
    min_domains: int
    node_affinity_policy: str
    node_taints_policy: str
    #: The selector with ``matchLabelKeys`` merged; None when the constraint has no labelSelector
    #: (it then matches nothing, as upstream's LabelSelectorAsSelector(nil)).
    requirements: tuple[k8s_labels.Requirement, ...] | None
    matches: k8s_labels.Matcher
    #: The declaring pod: its node affinity and tolerations decide eligible nodes under Honor.
    source: Pod
    #: Which nodes are eligible: equal keys, equal node sets.
    node_filter_key: _NodeFilterKey
    #: Identity for deduplication: equal keys, equal constraints.
    key: tuple[object, ...]

    def eligible(self, node: Node) -> bool:
        """The node is a domain member under nodeAffinityPolicy and nodeTaintsPolicy."""
        if self.node_affinity_policy == HONOR and not k8s_affinity.pod_matches_node_selector(
            self.source, node
        ):
            return False
        return not (
            self.node_taints_policy == HONOR
            and k8s_taints.untolerated_taint(node.spec.taints, self.source.spec.tolerations, _TAINT_EFFECTS)
            is not None
        )

    def describe(self) -> str:
        return f"topologyKey={self.topology_key} maxSkew={self.max_skew} {self.when_unsatisfiable}"


@dataclass(frozen=True, slots=True)
class _SelectorParts:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    min_domains: int
    node_affinity_policy: str
    node_taints_policy: str
    requirements: tuple[k8s_labels.Requirement, ...] | None
    matches: k8s_labels.Matcher
    selector_key: tuple[object, ...] | None


def _affinity_key(pod: Pod, content: ContentKeys) -> tuple[bytes, bytes] | None:
    """What decides the nodes ``nodeAffinityPolicy: Honor`` keeps: nodeSelector and required
    node affinity (None: neither)."""
    spec = pod.spec
    required = None
    if spec.affinity is not None and spec.affinity.node_affinity is not None:
        required = spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    if not spec.node_selector and required is None:
        return None
    return (content(spec.node_selector or _NO_LABELS), content(required))


def _tolerations_key(pod: Pod, content: ContentKeys) -> bytes | None:
    return content(pod.spec.tolerations) if pod.spec.tolerations else None


_NO_LABELS: dict[str, str] = {}
#: What ConstraintCache.build reads of a pod besides the constraint: spread constraints, labels,
#: nodeSelector, affinity, tolerations.
_PodRecords = tuple[object, object, object, object, object]
#: (nodeAffinityPolicy, _affinity_key, nodeTaintsPolicy, _tolerations_key): equal keys, equal nodes
_NodeFilterKey = tuple[str, tuple[bytes, bytes] | None, str, bytes | None]


class ConstraintCache:
    """Builds SpreadConstraints from (constraint, pod), sharing the work between the many replicas
    that declare the same constraint."""

    def __init__(self) -> None:
        self._parts: dict[tuple[bytes, tuple[str | None, ...]], tuple[_SelectorParts, int] | str] = {}
        #: the content of the parts' identity (see ``build``) -> a small number standing for it
        self._parts_ids: dict[tuple[object, ...], int] = {}
        self._built: dict[tuple[int, tuple[bytes, bytes] | None, bytes | None], SpreadConstraint] = {}
        self.content = ContentKeys()
        #: ids of what ``build`` reads of a pod -> (those objects, what ``build_all`` gave)
        self._by_records: dict[
            tuple[int, int, int, int, int], tuple[_PodRecords, list[SpreadConstraint | str]]
        ] = {}

    def build_all(self, pod: Pod) -> list[SpreadConstraint | str]:
        """``build`` for each of the pod's constraints, in order (a string says why one is
        invalid). The pods whose constraints, labels, nodeSelector, affinity and tolerations are
        the same objects (replicas decoded by the snapshot loader) share the answer."""
        spec = pod.spec
        tscs = spec.topology_spread_constraints
        labels = pod.metadata.labels
        node_selector = spec.node_selector
        affinity = spec.affinity
        tolerations = spec.tolerations
        key = (id(tscs), id(labels), id(node_selector), id(affinity), id(tolerations))
        hit = self._by_records.get(key)
        if hit is not None:
            r = hit[0]
            if (
                r[0] is tscs
                and r[1] is labels
                and r[2] is node_selector
                and r[3] is affinity
                and r[4] is tolerations
            ):
                return hit[1]
        out: list[SpreadConstraint | str] = []
        for tsc in tscs or ():
            try:
                out.append(self.build(tsc, pod))
            except k8s_labels.SelectorError as e:
                out.append(str(e))
        # (the entry holds the records, so their ids are not reused while cached)
        self._by_records[key] = ((tscs, labels, node_selector, affinity, tolerations), out)
        return out

    def build(self, constraint: TopologySpreadConstraint, pod: Pod) -> SpreadConstraint:
        """The constraint as it applies to ``pod``; raises SelectorError for an invalid selector."""
        labels = pod.metadata.labels or {}
        keys = constraint.match_label_keys
        values: tuple[str | None, ...] = tuple(labels.get(k) for k in keys) if keys else ()
        content = self.content
        raw = (content(constraint), values)
        hit = self._parts.get(raw)
        if hit is None:
            found = self._selector_parts(constraint, values)
            if isinstance(found, str):
                hit = found
            else:
                # Equal parts may come from different raw constraints (e.g. requirements in
                # another order): they share one number, so they build one SpreadConstraint.
                same = (
                    found.max_skew,
                    found.topology_key,
                    found.when_unsatisfiable,
                    found.min_domains,
                    found.selector_key,
                    found.node_affinity_policy,
                    found.node_taints_policy,
                )
                hit = (found, self._parts_ids.setdefault(same, len(self._parts_ids)))
            self._parts[raw] = hit
        if isinstance(hit, str):
            raise k8s_labels.SelectorError(hit)
        parts, parts_id = hit
        aff = _affinity_key(pod, content) if parts.node_affinity_policy == HONOR else None
        tol = _tolerations_key(pod, content) if parts.node_taints_policy == HONOR else None
        built = self._built.get((parts_id, aff, tol))
        if built is None:
            key = (
                parts.max_skew,
                parts.topology_key,
                parts.when_unsatisfiable,
                parts.min_domains,
                parts.selector_key,
                parts.node_affinity_policy,
                parts.node_taints_policy,
                aff,
                tol,
            )
            built = SpreadConstraint(
                max_skew=parts.max_skew,
                topology_key=parts.topology_key,
                when_unsatisfiable=parts.when_unsatisfiable,
                min_domains=parts.min_domains,
                node_affinity_policy=parts.node_affinity_policy,
                node_taints_policy=parts.node_taints_policy,
                requirements=parts.requirements,
                matches=parts.matches,
                source=pod,
                node_filter_key=(parts.node_affinity_policy, aff, parts.node_taints_policy, tol),
                key=key,
            )
            self._built[(parts_id, aff, tol)] = built
        return built

    @staticmethod
    def _selector_parts(c: TopologySpreadConstraint, values: tuple[str | None, ...]) -> _SelectorParts | str:
        reqs: tuple[k8s_labels.Requirement, ...] | None = None
        matches: k8s_labels.Matcher = k8s_labels.match_nothing
        selector_key: tuple[object, ...] | None = None
        if c.label_selector is not None:
            try:
                base = k8s_labels.label_selector_requirements(c.label_selector)
                merged = [
                    k8s_labels.new_requirement(k, k8s_labels.OP_EQUALS, (v,))
                    for k, v in zip(c.match_label_keys or (), values, strict=True)
                    if v is not None
                ]
            except k8s_labels.SelectorError as e:
                return f"labelSelector: {e}"
            reqs = tuple(merged + base)
            matches = k8s_labels.requirements_matcher(reqs)
            selector_key = tuple(sorted({(r.key, r.operator, tuple(sorted(set(r.values)))) for r in reqs}))
        min_domains = c.min_domains if c.min_domains is not None and c.min_domains > 0 else 1
        return _SelectorParts(
            max_skew=c.max_skew,
            topology_key=c.topology_key,
            when_unsatisfiable=c.when_unsatisfiable,
            min_domains=min_domains if c.when_unsatisfiable == DO_NOT_SCHEDULE else 1,
            node_affinity_policy=c.node_affinity_policy or HONOR,
            node_taints_policy=c.node_taints_policy or IGNORE,
            requirements=reqs,
            matches=matches,
            selector_key=selector_key,
        )


# --------------------------------------------------------------------------- domains


@dataclass(slots=True)
class _Topology:
    """The eligible nodes of one (topology key, node filter), by domain."""

    node_domain: dict[str, str]
    domain_nodes: dict[str, list[Node]]


class _Topologies:
    """The eligible nodes of each (topology key, node filter), computed once per Balance call."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self._cache: dict[tuple[str, _NodeFilterKey], _Topology] = {}

    def __call__(self, c: SpreadConstraint) -> _Topology:
        key = (c.topology_key, c.node_filter_key)
        topo = self._cache.get(key)
        if topo is None:
            node_domain: dict[str, str] = {}
            domain_nodes: dict[str, list[Node]] = {}
            for node in self.nodes:
                value = (node.metadata.labels or {}).get(c.topology_key)
                if value is None or not c.eligible(node):
                    continue
                node_domain[node.metadata.name] = value
                domain_nodes.setdefault(value, []).append(node)
            topo = _Topology(node_domain, domain_nodes)
            self._cache[key] = topo
        return topo


@dataclass(slots=True, eq=False)
class Spread:
    """One constraint in one namespace: the pods it counts per domain, and the live counts
    (the pods already planned for eviction in this Balance call are gone from them).

    Sparse: only domains holding a matching pod have entries (a hostname constraint of a small
    workload has thousands of empty domains); ``domains`` is how many eligible domains exist.
    """

    constraint: SpreadConstraint
    topology: _Topology
    #: Matching pods per non-empty eligible domain, in canonical order, as the snapshot has them.
    pods: dict[str, list[Pod]]
    domains: int
    counts: dict[str, int] = field(default_factory=dict)
    #: Skew when planning started (``minDomains`` applied).
    initial_skew: int = 0
    #: How many counted pods are planned to leave.
    pending: int = 0
    _floor: int | None = None
    _top: int | None = None

    def reset(self) -> None:
        """Back to the snapshot's counts."""
        self.counts = {value: len(pods) for value, pods in self.pods.items()}
        self.pending = 0
        self._floor = self._top = None

    def floor(self) -> int:
        """The global minimum, with kube-scheduler's minDomains rule."""
        if self._floor is None:
            counts = self.counts
            missing = len(counts) < self.domains or self.domains < self.constraint.min_domains
            self._floor = 0 if missing or not counts else min(counts.values())
        return self._floor

    def top(self) -> int:
        if self._top is None:
            self._top = max(self.counts.values(), default=0)
        return self._top

    def skew(self) -> int:
        return self.top() - self.floor()

    def remove(self, domain: str) -> None:
        self.counts[domain] -= 1
        self.pending += 1
        self._floor = self._top = None

    def removal_allowed(self, domain: str) -> bool:
        """Taking one pod out of ``domain`` leaves this constraint no more skewed than
        ``max(initial skew, maxSkew)``: only shrinking a smallest domain raises it (by one)."""
        if self.domains < max(2, self.constraint.min_domains) or self.counts[domain] != self.floor():
            return True
        return self.skew() + 1 <= max(self.initial_skew, self.constraint.max_skew)

    def admits(self, pod: Pod, node: Node, own: str | None) -> bool:
        """kube-scheduler's PodTopologySpread filter for ``pod`` on ``node``, with the pod gone
        from ``own``, its current domain here (None if it is not counted)."""
        c = self.constraint
        value = (node.metadata.labels or {}).get(c.topology_key)
        if value is None:
            return False
        count = self.counts.get(value, 0) - (1 if own == value else 0)
        low = self.floor()
        if own is not None and self.domains >= c.min_domains and self.counts[own] == low:
            low -= 1
        self_match = 1 if c.matches(pod.metadata.labels or {}) else 0
        return count + self_match - low <= c.max_skew


class NamespacePods:
    """The countable pods of one namespace (canonical order), with a lazy label index."""

    def __init__(self, pods: list[Pod]) -> None:
        self.pods = pods
        self._rank: dict[int, int] | None = None
        self._index: dict[str, tuple[dict[str, list[Pod]], list[Pod]]] = {}

    @property
    def rank(self) -> dict[int, int]:
        """id(pod) -> its position in ``pods`` (built on first use; ``pods`` keeps the ids valid)."""
        if self._rank is None:
            self._rank = {id(p): i for i, p in enumerate(self.pods)}
        return self._rank

    def _by_label(self, key: str) -> tuple[dict[str, list[Pod]], list[Pod]]:
        """The pods having label ``key``, by value and all together (canonical order)."""
        hit = self._index.get(key)
        if hit is None:
            by_value: dict[str, list[Pod]] = {}
            having: list[Pod] = []
            for pod in self.pods:
                value = (pod.metadata.labels or {}).get(key)
                if value is not None:
                    by_value.setdefault(value, []).append(pod)
                    having.append(pod)
            hit = self._index[key] = (by_value, having)
        return hit

    def matching(self, c: SpreadConstraint) -> list[Pod]:
        """The pods the constraint's selector matches, in canonical order. A requirement that
        needs the label (``=``, ``in``, ``exists``) narrows the candidates through the index."""
        reqs = c.requirements
        if reqs is None:
            return []
        candidates: Sequence[Pod] = self.pods
        for r in reqs:
            if r.operator in _EQUALITY_OPS:
                by_value = self._by_label(r.key)[0]
                values = sorted(set(r.values))
                if len(values) == 1:
                    candidates = by_value.get(values[0], [])
                else:
                    rank = self.rank
                    candidates = sorted(
                        (p for v in values for p in by_value.get(v, ())), key=lambda p: rank[id(p)]
                    )
                break
        else:
            for r in reqs:
                if r.operator == k8s_labels.OP_EXISTS:
                    candidates = self._by_label(r.key)[1]
                    break
        matches = c.matches
        return [p for p in candidates if matches(p.metadata.labels or {})]


# --------------------------------------------------------------------------- the plugin


_NO_PODS: list[Pod] = []


@dataclass(slots=True)
class _Domain:
    value: str
    nodes: list[Node]
    #: The counted pods (some may be planned to leave already: see ``_Chooser.take``); read only.
    pods: list[Pod]
    phantom: bool = False
    #: The size as balancing accounts it (pods moved in or out).
    size: int = 0
    #: Remaining pods in keep-first order (built when the domain first gives pods away).
    keep: list[Pod] | None = None


@dataclass(slots=True)
class Plan:
    """Pods to evict, in order, each with the reason it was chosen for."""

    order: list[Pod] = field(default_factory=list)
    #: id(pod) -> why (the pods of ``order``)
    reasons: dict[int, str] = field(default_factory=dict)
    namespaces: dict[str, _Namespace] = field(default_factory=dict)

    def add(self, pod: Pod, reason: str) -> None:
        if id(pod) not in self.reasons:
            self.reasons[id(pod)] = reason
            self.order.append(pod)

    def may_evict(self, pod: Pod) -> bool:
        """Given the evictions made so far, evicting the pod leaves every constraint of its
        namespace within ``max(initial skew, maxSkew)``. The plan assumed every planned eviction
        happens; when the evictor refuses some, this keeps the promise for the ones that do."""
        ns = self.namespaces.get(pod.metadata.namespace)
        return ns is None or ns.removal_allowed(pod, None)

    def evicted(self, pod: Pod) -> None:
        ns = self.namespaces.get(pod.metadata.namespace)
        if ns is not None:
            ns.remove(pod)


def _has_selector_or_affinity(pod: Pod) -> bool:
    spec = pod.spec
    return spec.node_selector is not None or (
        spec.affinity is not None and spec.affinity.node_affinity is not None
    )


def _priority_key(pod: Pod) -> tuple[int, int]:
    """Lowest first; a pod without a resolved priority before any with one."""
    prio = pod.spec.priority
    return (0, 0) if prio is None else (1, prio)


class RemovePodsViolatingTopologySpreadConstraint:
    name: ClassVar[str] = "RemovePodsViolatingTopologySpreadConstraint"
    Args: ClassVar[type[RemovePodsViolatingTopologySpreadConstraintArgs]] = (
        RemovePodsViolatingTopologySpreadConstraintArgs
    )

    def __init__(self, args: RemovePodsViolatingTopologySpreadConstraintArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.kinds = frozenset(args.constraints)
        ns = args.namespaces
        self._namespace_rule = namespace_rule(ns.include, ns.exclude) if ns else None
        self.label_match: k8s_labels.Matcher | None = (
            k8s_labels.compile_label_selector(args.label_selector.to_selector(), none_matches=True)
            if args.label_selector is not None
            else None
        )

    def namespace_allowed(self, namespace: str) -> bool:
        allowed = self._namespace_rule
        return allowed is None or allowed(namespace)

    def balance(self, nodes: Sequence[Node]) -> Status | None:
        ev = self.handle.evictor
        if ev.total_limit_reached() or not self.kinds:
            return None
        plan = self.plan(nodes)
        if not plan.order:
            return None
        rank = {id(p): i for i, p in enumerate(plan.order)}
        findings = self.handle.findings

        def node_full(pod: Pod) -> None:
            if findings.enabled:
                findings.left(pod, f"node {pod.spec.node_name} reached its eviction limit")

        def may_evict(pod: Pod) -> bool:
            if plan.may_evict(pod):
                return True
            if findings.enabled:
                findings.left(
                    pod,
                    "chosen, but with the evictions refused so far, evicting it would leave a "
                    "spread constraint of its namespace more skewed than max(its skew, its maxSkew)",
                )
            return False

        ev.evict_in_order(
            self.handle.sort_pods(plan.order, key=lambda p: rank[id(p)]),
            lambda pod: plan.reasons[id(pod)],
            only_if=may_evict,
            on_gone=plan.evicted,
            on_node_full=node_full,
        )
        return None

    def plan(self, nodes: Sequence[Node]) -> Plan:
        """Which pods to evict, in order, and why (nothing is evicted)."""
        run = _Run(self, nodes)
        namespaces, countable, declaring = run.scan()
        for namespace in namespaces:
            run.plan_namespace(
                namespace, NamespacePods(countable.get(namespace, [])), declaring.get(namespace, [])
            )
        return run.plan


class _Run:
    """One Balance call: this snapshot's caches, and the plan being built."""

    def __init__(self, plugin: RemovePodsViolatingTopologySpreadConstraint, nodes: Sequence[Node]) -> None:
        self.plugin = plugin
        self.handle = plugin.handle
        self.snapshot: ClusterView = plugin.handle.snapshot
        self.evictor: Evictor = plugin.handle.evictor
        self.node_fit = plugin.args.topology_balance_node_fit
        self.nodes = list(nodes)
        self.node_by_name = {n.metadata.name: n for n in self.nodes}
        self.constraints = ConstraintCache()
        self.topology = _Topologies(self.nodes)
        #: id(pod) -> movable (the pods are the snapshot's, alive for the whole call)
        self.movable_cache: dict[int, bool] = {}
        self.findings = plugin.handle.findings
        #: reasons are composed only when someone listens (checked once per constraint)
        self.reporting = self.findings.enabled
        self.plan = Plan()

    def scan(self) -> tuple[list[str], dict[str, list[Pod]], dict[str, list[Pod]]]:
        """One pass over the pods: the namespaces where a pod bound to a given node declares a
        constraint to balance (sorted); the pods kube-scheduler counts, by namespace: bound to a
        given node, not terminating, not finished (in the snapshot's order, as
        ``pods_in_namespace`` lists them); and those of them that declare constraints."""
        kinds = self.plugin.kinds
        allowed = self.plugin.namespace_allowed
        by_name = self.node_by_name
        found: set[str] = set()
        countable: dict[str, list[Pod]] = {}
        declaring: dict[str, list[Pod]] = {}
        for pod in self.snapshot.pods:
            spec = pod.spec
            if spec.node_name not in by_name:
                continue
            meta = pod.metadata
            ns = meta.namespace
            tscs = spec.topology_spread_constraints
            if tscs and ns not in found and any(c.when_unsatisfiable in kinds for c in tscs) and allowed(ns):
                found.add(ns)
            if meta.deletion_timestamp is None and pod.status.phase not in _FINISHED_PHASES:
                same_ns = countable.get(ns)
                if same_ns is None:
                    countable[ns] = [pod]
                else:
                    same_ns.append(pod)
                if tscs:
                    same_ns = declaring.get(ns)
                    if same_ns is None:
                        declaring[ns] = [pod]
                    else:
                        same_ns.append(pod)
        return sorted(found), countable, declaring

    def movable(self, pod: Pod) -> bool:
        """The profile's filter and the plugin's labelSelector let the pod go."""
        hit = self.movable_cache.get(id(pod))
        if hit is None:
            match = self.plugin.label_match
            hit = (match is None or match(pod.metadata.labels or {})) and self.evictor.filter(pod)
            self.movable_cache[id(pod)] = hit
        return hit

    def plan_namespace(self, namespace: str, countable: NamespacePods, declaring: list[Pod]) -> None:
        """Plan one namespace: ``countable`` its pods that count, ``declaring`` those of them
        that declare constraints."""
        ns = _Namespace(self.constraints, self.topology, countable, declaring)
        kinds = self.plugin.kinds
        for spread in list(ns.spreads.values()):
            if spread.constraint.when_unsatisfiable in kinds:
                self.balance_constraint(ns, spread)
        ns.reset()
        self.plan.namespaces[namespace] = ns

    def balance_constraint(self, ns: _Namespace, spread: Spread) -> None:
        c = spread.constraint
        # Cheap test first, on the sparse counts: most constraints are balanced.
        # (Placing pending pods only fills the smallest domains: it never adds skew.)
        if spread.skew() <= c.max_skew:
            if self.reporting:
                self.report_within(ns, spread, spread.skew())
            return
        counts = spread.counts
        domains = [
            _Domain(value, nodes, spread.pods.get(value, _NO_PODS), size=counts.get(value, 0))
            for value, nodes in sorted(spread.topology.domain_nodes.items())
        ]
        # Pods already planned to leave for another constraint are gone from these domains, but
        # kube-scheduler will place them again, where this constraint's domains are smallest.
        pending = spread.pending
        if pending and domains:
            heap = [(d.size, d.value, k) for k, d in enumerate(domains)]
            heapq.heapify(heap)
            for _ in range(pending):
                size, value, k = heapq.heappop(heap)
                domains[k].size = size + 1
                heapq.heappush(heap, (size + 1, value, k))
        # Missing domains (minDomains) only draw pods towards the existing domains below the
        # average, which node fit checks. Without node fit nothing would stop a pod from being
        # "moved" into a domain that has no node at all, where upstream (no minDomains) evicts
        # nothing: then minDomains is left out of the plan, as upstream leaves it out.
        if self.node_fit:
            for k in range(c.min_domains - len(domains)):
                domains.append(_Domain(f"<missing domain {k + 1}>", [], [], phantom=True))
        if len(domains) < 2:
            if self.reporting:
                self.report_within(ns, spread, None)
            return
        sizes = [d.size for d in domains]
        if max(sizes) - min(sizes) <= c.max_skew:
            if self.reporting:
                self.report_within(ns, spread, max(sizes) - min(sizes))
            return
        ideal = sum(sizes) / len(domains)
        domains.sort(key=lambda d: (d.size, not d.phantom, d.value))
        below_nodes = [n for d in domains if d.size < ideal for n in d.nodes]
        chooser = _Chooser(self, ns, spread, below_nodes)
        initial = {d.value: d.size for d in domains} if self.reporting else {}

        i, j = 0, len(domains) - 1
        while i < j:
            if domains[j].size <= ideal:
                j -= 1
            low, high = domains[i], domains[j]
            skew = high.size - low.size
            if skew <= c.max_skew:
                i += 1
                continue
            move = min(
                math.ceil(high.size - ideal),
                math.ceil(ideal - low.size),
                math.ceil((skew - c.max_skew) / 2),
            )
            if move <= 0:
                i += 1
                continue
            reason = (
                f"topology spread constraint {c.describe()}: domain {high.value} has {high.size} "
                f"matching pods, {low.value} has {low.size}, ideal {ideal:.2f}"
            )
            for pod in chooser.take(high, move):
                self.plan.add(pod, reason)
            high.size -= move
            low.size += move
        if self.reporting:
            self.report_kept(ns, spread, domains, initial, ideal, chooser.why)

    # ------------------------------------------------------------------ findings (when reported)

    def report_within(self, ns: _Namespace, spread: Spread, skew: int | None) -> None:
        """Every pod the constraint counts stays: its domains are within maxSkew (``skew``), or
        there are fewer than two of them (``skew`` None)."""
        c = spread.constraint
        left = self.findings.left
        planned = ns.planned
        for value, pods in spread.pods.items():
            if skew is None:
                why = (
                    f"topology {c.topology_key}={value} is the only eligible domain of constraint "
                    f"{c.describe()}: nothing to spread"
                )
            else:
                why = (
                    f"topology {c.topology_key}={value} has {spread.counts.get(value, 0)} pods, "
                    f"skew {skew} <= maxSkew {c.max_skew} ({c.describe()})"
                )
            for pod in pods:
                if id(pod) not in planned:
                    left(pod, why)

    def report_kept(
        self,
        ns: _Namespace,
        spread: Spread,
        domains: list[_Domain],
        initial: dict[str, int],
        ideal: float,
        why: dict[int, str],
    ) -> None:
        """The pods a skewed constraint counts and did not choose: why each stays."""
        c = spread.constraint
        left = self.findings.left
        planned = ns.planned
        for d in domains:
            if d.phantom:
                continue
            size = initial.get(d.value, 0)
            if size <= ideal:
                general = (
                    f"topology {c.topology_key}={d.value} has {size} pods, not above the ideal "
                    f"average {ideal:.2f} ({c.describe()})"
                )
            elif size == d.size:
                general = (
                    f"topology {c.topology_key}={d.value} has {size} pods, above the ideal average "
                    f"{ideal:.2f} but within maxSkew {c.max_skew} of the domains below it ({c.describe()})"
                )
            else:
                general = (
                    f"topology {c.topology_key}={d.value} has {size} pods, ideal average {ideal:.2f}: "
                    f"it gives {size - d.size}, this pod is kept by the keep order "
                    f"(priority, node selector, evictability; {c.describe()})"
                )
            for pod in d.pods:
                if id(pod) not in planned:
                    left(pod, why.get(id(pod), general))


class _Namespace:
    """Every constraint of one namespace with its Spread, and which Spreads count which pod."""

    def __init__(
        self,
        constraints: ConstraintCache,
        topology: _Topologies,
        ns_pods: NamespacePods,
        declaring: list[Pod],
    ) -> None:
        # (not the _Run: the plan keeps the namespaces, and a cycle would outlive the call
        # until the garbage collector runs)
        self.constraints = constraints
        self.topology = topology
        self.ns_pods = ns_pods
        #: id(constraint) -> its Spread (equal constraints are one object of the run's cache)
        self.spreads: dict[int, Spread] = {}
        #: id(pod) -> the Spreads counting the pod, with its domain in each (ids of ``ns_pods``)
        self.by_pod: dict[int, list[tuple[Spread, str]]] = {}
        #: ids of the pods planned to leave
        self.planned: set[int] = set()
        build_all = constraints.build_all
        done: set[int] = set()  # constraint lists already seen valid (replicas share theirs)
        for pod in declaring:
            built = build_all(pod)
            if id(built) in done:
                continue
            valid = True
            for c in built:
                if isinstance(c, str):
                    log.error("pod %s: cannot process topology spread constraint: %s", pod.key, c)
                    valid = False
                else:
                    self._spread(c)
            if valid:
                done.add(id(built))  # (the run's cache holds the lists, so ids are not reused)

    def spread_of(self, tsc: TopologySpreadConstraint, pod: Pod) -> Spread | None:
        """The Spread of ``tsc`` as declared by ``pod`` (None if its selector is invalid)."""
        try:
            c = self.constraints.build(tsc, pod)
        except k8s_labels.SelectorError as e:
            log.error("pod %s: cannot process topology spread constraint: %s", pod.key, e)
            return None
        return self._spread(c)

    def _spread(self, c: SpreadConstraint) -> Spread:
        spread = self.spreads.get(id(c))
        if spread is None:
            topo = self.topology(c)
            pods: dict[str, list[Pod]] = {}
            node_domain = topo.node_domain
            for p in self.ns_pods.matching(c):
                value = node_domain.get(p.spec.node_name)
                if value is not None:
                    members = pods.get(value)
                    if members is None:
                        pods[value] = [p]
                    else:
                        members.append(p)
            spread = Spread(c, topo, pods, len(topo.domain_nodes))
            spread.reset()
            spread.initial_skew = spread.skew()
            self.spreads[id(c)] = spread
            by_pod = self.by_pod
            for value, members in pods.items():
                for p in members:
                    by_pod.setdefault(id(p), []).append((spread, value))
        return spread

    def remove(self, pod: Pod) -> None:
        self.planned.add(id(pod))
        for spread, value in self.by_pod.get(id(pod), ()):
            spread.remove(value)

    def reset(self) -> None:
        """Forget the planned removals (before the evictions replay them)."""
        self.planned.clear()
        for spread in self.spreads.values():
            spread.reset()

    def removal_allowed(self, pod: Pod, balancing: Spread | None) -> bool:
        """Evicting the pod does not push a constraint of the namespace (other than
        ``balancing``) past ``max(its initial skew, its maxSkew)``."""
        for spread, value in self.by_pod.get(id(pod), ()):
            if spread is not balancing and not spread.removal_allowed(value):
                return False
        return True

    def domain_of(self, pod: Pod, spread: Spread) -> str | None:
        for s, value in self.by_pod.get(id(pod), ()):
            if s is spread:
                return value
        return None


@dataclass(slots=True)
class _FitScan:
    passing: list[Node] = field(default_factory=list)
    next: int = 0


class _Chooser:
    """Picks the pods a domain gives away for one constraint, and answers "could it go?"."""

    def __init__(self, run: _Run, ns: _Namespace, spread: Spread, below_nodes: list[Node]) -> None:
        self.run = run
        self.ns = ns
        self.spread = spread
        self.below_nodes = below_nodes
        self._scans: dict[tuple[object, ...], _FitScan] = {}
        #: id(pod) -> why a pod looked at was not chosen (only filled when findings are reported)
        self.why: dict[int, str] = {}

    def keep_order(self, pods: list[Pod]) -> list[Pod]:
        """Upstream's order: the pods given away are taken from the back."""
        run = self.run
        rank = self.ns.ns_pods.rank
        kept: list[Pod] = []
        pinned: list[Pod] = []
        free: list[Pod] = []
        for pod in pods:
            if not run.movable(pod):
                kept.append(pod)
            elif _has_selector_or_affinity(pod):
                pinned.append(pod)
            else:
                free.append(pod)

        def evict_first(p: Pod) -> tuple[int, int, int]:
            return (*_priority_key(p), -rank[id(p)])

        sort = run.handle.sort_pods
        return kept + sort(pinned, key=evict_first)[::-1] + sort(free, key=evict_first)[::-1]

    def fits(self, pod: Pod) -> bool:
        """Some eligible node of a domain below the ideal average, other than its own, would
        take the pod without breaking another of its DoNotSchedule constraints."""
        own = pod.spec.node_name
        others = self._other_hard_constraints(pod)
        domain_of = self.ns.domain_of
        for node in self._fitting_nodes(pod):
            if node.metadata.name == own:
                continue
            if all(s.admits(pod, node, domain_of(pod, s)) for s in others):
                return True
        return False

    def _fitting_nodes(self, pod: Pod) -> Iterator[Node]:
        """The nodes of ``below_nodes`` that pass node fit for the pod, found lazily and shared by
        the pods of the same shape (the replicas of a workload): a shape that fits the first node
        costs one check, one that fits nowhere one pass over the nodes, whatever the replicas."""
        spec = pod.spec
        snapshot = self.run.snapshot
        content = self.run.constraints.content
        key = (
            pod.metadata.namespace,
            content(spec.node_selector),
            content(spec.affinity),
            content(spec.tolerations),
            tuple(sorted(snapshot.requests(pod).items())),
        )
        scan = self._scans.get(key)
        if scan is None:
            scan = self._scans[key] = _FitScan()
        passing = scan.passing
        below = self.below_nodes
        i = 0
        while True:
            if i < len(passing):
                yield passing[i]
                i += 1
            elif scan.next < len(below):
                node = below[scan.next]
                scan.next += 1
                if not self.run.handle.node_fit_failures(pod, node):
                    passing.append(node)
            else:
                return

    def _why_stays(self, pod: Pod, domain: _Domain) -> str:
        """Why ``take`` passed over a pod of ``domain`` (for the findings; recomputes its tests)."""
        run = self.run
        c = self.spread.constraint
        where = f"topology {c.topology_key}={domain.value} gives pods ({c.describe()}), but this one "
        if not run.movable(pod):
            match = run.plugin.label_match
            if match is not None and not match(pod.metadata.labels or {}):
                return where + "is not selected by the plugin's labelSelector"
            return where + "is refused by the profile's filters"
        if not self.ns.removal_allowed(pod, self.spread):
            return where + (
                "would leave another spread constraint of its namespace more skewed than "
                "max(its skew, its maxSkew)"
            )
        return where + (
            f"fits none of the {len(self.below_nodes)} eligible nodes of the domains below the ideal "
            "average (topologyBalanceNodeFit)"
        )

    def _other_hard_constraints(self, pod: Pod) -> list[Spread]:
        out = []
        for tsc in pod.spec.topology_spread_constraints or ():
            if tsc.when_unsatisfiable != DO_NOT_SCHEDULE:
                continue
            spread = self.ns.spread_of(tsc, pod)
            if spread is not None and spread is not self.spread:
                out.append(spread)
        return out

    def take(self, domain: _Domain, count: int) -> list[Pod]:
        """Account ``count`` pods as leaving ``domain``; return those to evict.

        Pods that may leave (evictor filter, labelSelector, no other constraint made worse) and
        fit elsewhere go first, from the back of the keep order. If there are not enough, the
        next ones from the back are accounted as moved too, but evicted only when
        ``topologyBalanceNodeFit`` is off and they may leave.
        """
        ns = self.ns
        if domain.keep is None:
            # Without the pods already planned to leave for another constraint (none of this
            # constraint's: those were taken from their domain's keep list).
            planned = ns.planned
            pods = [p for p in domain.pods if id(p) not in planned] if planned else domain.pods
            domain.keep = self.keep_order(pods)
        remaining = domain.keep
        run = self.run
        chosen: list[int] = []
        for idx in range(len(remaining) - 1, -1, -1):
            if len(chosen) == count:
                break
            pod = remaining[idx]
            if run.movable(pod) and ns.removal_allowed(pod, self.spread) and self.fits(pod):
                chosen.append(idx)
                ns.remove(pod)
            elif run.reporting:
                self.why[id(pod)] = self._why_stays(pod, domain)
        evict = [remaining[idx] for idx in chosen]
        taken = set(chosen)
        rest = [p for idx, p in enumerate(remaining) if idx not in taken]
        shortfall = count - len(chosen)
        if shortfall > 0:
            accounted = rest[max(0, len(rest) - shortfall) :]
            rest = rest[: len(rest) - len(accounted)]
            if not run.node_fit:
                for pod in reversed(accounted):
                    if run.movable(pod) and ns.removal_allowed(pod, self.spread):
                        evict.append(pod)
                        ns.remove(pod)
        domain.keep = rest
        return evict
