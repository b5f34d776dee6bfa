"""The domains of RemovePodsViolatingTopologySpreadConstraint: eligible nodes by domain, the
sparse per-domain counts of one constraint, a namespace's pods indexed by label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from desched.k8s import labels as k8s_labels
from desched.k8s import topologyspread as k8s_tsc
from desched.k8s.objects import Node, Pod
from desched.plugins.removepodsviolatingtopologyspreadconstraint._constraints import (
    NodeFilterKey,
    SpreadConstraint,
)

_EQUALITY_OPS = (k8s_labels.OP_EQUALS, k8s_labels.OP_DOUBLE_EQUALS, k8s_labels.OP_IN)


@dataclass(slots=True)
class _Topology:
    """The eligible nodes of one (topology key, node filter), by domain."""

    node_domain: dict[str, str]
    domain_nodes: dict[str, list[Node]]


class Topologies:
    """The eligible nodes of each (topology key, node filter), computed once per Balance call."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self._cache: dict[tuple[str, NodeFilterKey], _Topology] = {}

    def __call__(self, c: SpreadConstraint) -> _Topology:
        key = (c.topology_key, c.node_filter_key)
        topo = self._cache.get(key)
        if topo is None:
            node_domain: dict[str, str] = {}
            domain_nodes: dict[str, list[Node]] = {}
            for node in self.nodes:
                value = (node.metadata.labels or {}).get(c.topology_key)
                if value is None or not k8s_tsc.node_eligible(c.source, c.declared, node):
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


@dataclass(slots=True)
class Domain:
    value: str
    nodes: list[Node]
    #: The counted pods (some may be planned to leave already: see ``_Chooser.take``); read only.
    pods: list[Pod]
    phantom: bool = False
    #: The size as balancing accounts it (pods moved in or out).
    size: int = 0
    #: Remaining pods in keep-first order (built when the domain first gives pods away).
    keep: list[Pod] | None = None
