"""Placement simulation: where kube-scheduler 1.36 would put the pods a descheduling cycle evicts.

Upstream descheduler's dry run says what it would evict, never where the pods would go (its
issue #1584). ``desched simulate`` answers it: every evicted pod that a controller re-creates (a
ReplicaSet's, StatefulSet's, Job's, DaemonSet's replacement; a bare pod is gone, and so is a
finished one, which its controller already counted as done) is scheduled again the way
kube-scheduler 1.36's default profile would, one pod at a time, each placement changing what the
next pod sees. By default each replacement is placed right after its pod's eviction (the
ReplicaSet controller and kube-scheduler act within milliseconds, while the cycle still evicts),
with the evicted pods still terminating on their nodes (holding their requests and
anti-affinity; spread constraints no longer count them); ``PlacementOptions.order`` and
``terminating`` choose placement after the cycle (higher priority first) and evicted pods gone
at once (kwok). Replacements that fit nowhere stay Pending, with the message
kube-scheduler would put in their ``PodScheduled`` condition
("0/7 nodes are available: 3 Insufficient cpu, 4 node(s) had untolerated taint {dedicated: gpu}.").

**Filters** (kube-scheduler's, in its order; a node reports the first that fails):

1. NodeUnschedulable: a cordoned node, unless the pod tolerates
   ``node.kubernetes.io/unschedulable:NoSchedule``;
2. TaintToleration: every ``NoSchedule``/``NoExecute`` taint must be tolerated. A node whose
   Ready condition is not True carries the ``node.kubernetes.io/not-ready`` (``unreachable`` when
   Unknown) ``NoSchedule`` taint the node lifecycle controller would add, if the snapshot lacks it;
3. NodeAffinity: ``spec.nodeSelector`` and required node affinity;
4. NodeResourcesFit: ``Too many pods``, then ``Insufficient <resource>`` for every requested
   resource that exceeds allocatable minus the requests of the pods occupying the node;
5. PodTopologySpread, ``DoNotSchedule`` constraints: the node must carry every constraint's
   topology key; placing the pod must not make its domain exceed the global minimum (0 below
   ``minDomains`` domains) by more than ``maxSkew``. Domains are the values of the nodes that pass
   ``nodeAffinityPolicy`` (default Honor) and ``nodeTaintsPolicy`` (default Ignore); counted are
   the namespace's pods that match the selector (``matchLabelKeys`` merged in), not terminating;
6. InterPodAffinity: no existing pod's required anti-affinity term may match the pod in the
   node's domain; the pod's own required anti-affinity terms must match no pod in the node's
   domain; its required affinity terms must each be satisfied in the node's domain by pods that
   match all of them (or, as kube-scheduler allows for the first pod of a group, no pod matches
   anywhere and the pod matches its own terms).

As kube-scheduler, only the first ``numFeasibleNodesToFind`` feasible nodes are looked for
(all nodes below 100; 50% minus 1% per 125 nodes, at least 5% and 100 nodes, above), starting
where the previous pod's search stopped, over the nodes in kube-scheduler's order (round-robin
over zones, by name within a zone).

**Scores** (``--score default``, kube-scheduler's default profile): each plugin scores the feasible
nodes 0..100, normalised as kube-scheduler normalises it, times its weight:
NodeResourcesFit LeastAllocated (cpu and memory, weight 1; requests with kube-scheduler's 100m /
200Mi stand-ins for containers that set none), NodeResourcesBalancedAllocation (1; 1.36's change
in balance the pod causes, kubernetes#135573; skipped for best-effort pods), TaintToleration
(3; ``PreferNoSchedule`` taints not tolerated, fewer is better),
NodeAffinity (2; the weights of the matching preferred terms), InterPodAffinity (2; the pod's
preferred (anti-)affinity terms against the pods in each domain) and PodTopologySpread (2;
``ScheduleAnyway`` constraints, or, for a pod without constraints that a ReplicaSet,
StatefulSet or ReplicationController owns, kube-scheduler's system defaults: hostname maxSkew 3
and zone maxSkew 5 over the pods of the same owner). ``--score generic`` replaces the two
node-resources scores with the KEP-2143 generic scorer (:mod:`desched.scheduling.scorer`),
weighted 2 (the weight of the two plugins it replaces). The highest total wins; ties go to the
root of the Go heap kube-scheduler 1.36 builds over its feasible list (:func:`heap_winner`).

Simplifications (documented in docs/simulation.md): ImageLocality and the volume plugins are not
modelled (the snapshot has no node images, PersistentVolumes or CSI limits); InterPodAffinity's
score counts only the incoming pod's preferred terms, not the existing pods' terms towards it;
NodePorts, DRA and preemption are not modelled; a pod that fits nowhere stays Pending (the
scheduler would try to preempt lower-priority pods).

Speed: what the checks take from a pod alone is memoised per pod *class* (the replicas of a
workload share one: requests, selectors, affinity, tolerations, spread constraints), what they
read of a node per node; pods are indexed by namespace and label for selectors; spread domain
counts, the pods matching each (anti-)affinity term (per domain, per node) and existing pods'
anti-affinity (with the nodes it rules out) are kept incrementally as pods are placed, and so is
each request class's list of fitting nodes (a bind drops the node from the classes it no longer
fits). Scoring sums the non-resource plugins once per distinct node *signature* (what they read of
a node) and computes the resource scores only of the nodes whose upper bound can still win. The
picture after the cycles is the picture before, brought up to date with the pods that came and
went. No pods-by-pods scans: placing 15,000 pods on a 5,000-node, 150,000-pod snapshot takes
seconds.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from itertools import chain, compress, filterfalse, repeat
from operator import add, is_, not_, sub
from typing import Any, Final, Generic, Protocol, TypeVar

import msgspec

from desched.cluster.snapshot import ClusterSnapshot
from desched.gcpause import gc_paused
from desched.k8s import affinity as k8s_affinity
from desched.k8s import labels as k8s_labels
from desched.k8s import pods as k8s_pods
from desched.k8s import priority as k8s_priority
from desched.k8s import resources as k8s_resources
from desched.k8s import taints as k8s_taints
from desched.k8s.objects import (
    ContainerState,
    ContainerStateRunning,
    ContainerStatus,
    LabelSelector,
    Node,
    Pod,
    PodAffinityTerm,
    PodCondition,
    PodStatus,
    Taint,
    Toleration,
    TopologySpreadConstraint,
)
from desched.k8s.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources
from desched.scheduling.scorer import GenericScorer, GenericScorerArgs, requesting_of

__all__ = [
    "DEFAULT_WEIGHTS",
    "GONE",
    "ORDER_AFTER_CYCLE",
    "ORDER_INTERLEAVED",
    "PENDING",
    "PLACED",
    "SCORE_DEFAULT",
    "SCORE_GENERIC",
    "TERMINATING_GONE",
    "TERMINATING_HOLD",
    "THRASH_RE_EVICTED",
    "THRASH_SAME_NODE",
    "ClusterPicture",
    "ConstraintSkew",
    "CycleLike",
    "CyclePlacement",
    "Decision",
    "EvictionRecorder",
    "NodeUsage",
    "PlacementOptions",
    "PlacementSimulator",
    "PodPlacement",
    "Simulation",
    "Stats",
    "Thrash",
    "balanced_allocation_score",
    "cluster_picture",
    "fit_error_message",
    "heap_winner",
    "num_feasible_nodes_to_find",
    "simulate",
]

SCORE_DEFAULT: Final = "default"
SCORE_GENERIC: Final = "generic"

#: kube-scheduler's default profile: score plugins and their weights (those modelled here).
DEFAULT_WEIGHTS: Final[Mapping[str, int]] = {
    "NodeResourcesFit": 1,
    "NodeResourcesBalancedAllocation": 1,
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "InterPodAffinity": 2,
    "PodTopologySpread": 2,
}
#: The name the generic scorer's contribution goes by in ``PlacementOptions.weights()``.
GENERIC_PLUGIN: Final = "NodeResourcesGeneric"

PLACED: Final = "placed"
PENDING: Final = "pending"
GONE: Final = "gone"

THRASH_SAME_NODE: Final = "same-node"
THRASH_RE_EVICTED: Final = "re-evicted"

# kube-scheduler's reasons, word for word (they make up the FitError message)
R_UNSCHEDULABLE: Final = "node(s) were unschedulable"
R_NODE_AFFINITY: Final = "node(s) didn't match Pod's node affinity/selector"
R_TOO_MANY_PODS: Final = "Too many pods"
R_SPREAD: Final = "node(s) didn't match pod topology spread constraints"
R_SPREAD_LABEL: Final = "node(s) didn't match pod topology spread constraints (missing required label)"
R_AFFINITY: Final = "node(s) didn't match pod affinity rules"
R_ANTI_AFFINITY: Final = "node(s) didn't match pod anti-affinity rules"
R_EXISTING_ANTI: Final = "node(s) didn't satisfy existing pods anti-affinity rules"

MAX_NODE_SCORE: Final = 100
MIN_FEASIBLE_NODES: Final = 100
MIN_FEASIBLE_PERCENTAGE: Final = 5

_FINISHED: Final = k8s_pods.FINISHED_PHASES
_SCHED_EFFECTS: Final = (k8s_taints.TAINT_NO_SCHEDULE, k8s_taints.TAINT_NO_EXECUTE)
_UNSCHEDULABLE_TAINT: Final = Taint(
    key="node.kubernetes.io/unschedulable", effect=k8s_taints.TAINT_NO_SCHEDULE
)
_NOT_READY: Final = "node.kubernetes.io/not-ready"
_UNREACHABLE: Final = "node.kubernetes.io/unreachable"
_LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
_LABEL_ZONE: Final = "topology.kubernetes.io/zone"
_LABEL_REGION: Final = "topology.kubernetes.io/region"
_LABEL_ZONE_BETA: Final = "failure-domain.beta.kubernetes.io/zone"
_LABEL_REGION_BETA: Final = "failure-domain.beta.kubernetes.io/region"
_DO_NOT_SCHEDULE: Final = "DoNotSchedule"
_SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
_HONOR: Final = "Honor"
#: Owners whose selector kube-scheduler's system-default spread constraints use.
_DEFAULT_SPREAD_OWNERS: Final = ("ReplicaSet", "StatefulSet", "ReplicationController")
_SYSTEM_DEFAULT_SPREAD: Final = ((_LABEL_HOSTNAME, 3), (_LABEL_ZONE, 5))
_NAME_CHARS: Final = "bcdfghjklmnpqrstvwxz2456789"  # what Kubernetes uses in generated names
_BIG: Final = 1 << 62

_encode = msgspec.msgpack.Encoder().encode
_T = TypeVar("_T")

Matcher = Callable[[Mapping[str, str]], bool]
PodMatcher = Callable[[Pod], bool]
ProgressFn = Callable[[str, int, int], None]


# =============================================================================== options

#: Replacements are placed as each pod is evicted (the ReplicaSet controller re-creates a pod
#: within milliseconds and kube-scheduler places it while the cycle is still evicting).
ORDER_INTERLEAVED: Final = "interleaved"
#: Replacements are placed after the cycle's last eviction, higher priority first.
ORDER_AFTER_CYCLE: Final = "after-cycle"
#: An evicted pod holds its node's resources (and its anti-affinity) while it terminates.
TERMINATING_HOLD: Final = "hold"
#: An evicted pod is gone at once.
TERMINATING_GONE: Final = "gone"


@dataclass(frozen=True)
class PlacementOptions:
    """How replacements are scored (the filters are always kube-scheduler's)."""

    #: ``default`` (kube-scheduler's default profile) or ``generic`` (KEP-2143 scorer).
    score: str = SCORE_DEFAULT
    #: The generic scorer's args; required with ``score="generic"``.
    generic: GenericScorerArgs | None = None
    #: The generic score's weight: it stands in for NodeResourcesFit and BalancedAllocation (1 + 1).
    generic_weight: int = 2
    #: kube-scheduler's ``percentageOfNodesToScore``; None is its adaptive default, 100 all nodes.
    percentage_of_nodes_to_score: int | None = None
    #: When replacements are placed: :data:`ORDER_INTERLEAVED` (each as its pod is evicted, the
    #: rest of the cycle's evictions not made yet) or :data:`ORDER_AFTER_CYCLE` (all after the
    #: cycle, higher priority first).
    order: str = ORDER_INTERLEAVED
    #: What an evicted pod does while replacements are placed: :data:`TERMINATING_HOLD` (it stays
    #: on its node, terminating, holding its requests, until the cycle's placements are done, as
    #: during a kubelet's graceful termination) or :data:`TERMINATING_GONE` (it is gone at once,
    #: as kwok deletes it).
    terminating: str = TERMINATING_HOLD

    def __post_init__(self) -> None:
        if self.order not in (ORDER_INTERLEAVED, ORDER_AFTER_CYCLE):
            raise ValueError(f"order must be {ORDER_INTERLEAVED} or {ORDER_AFTER_CYCLE}, got {self.order!r}")
        if self.terminating not in (TERMINATING_HOLD, TERMINATING_GONE):
            raise ValueError(
                f"terminating must be {TERMINATING_HOLD} or {TERMINATING_GONE}, got {self.terminating!r}"
            )
        if self.score not in (SCORE_DEFAULT, SCORE_GENERIC):
            raise ValueError(f"score must be {SCORE_DEFAULT} or {SCORE_GENERIC}, got {self.score!r}")
        if self.score == SCORE_GENERIC and self.generic is None:
            raise ValueError("the generic score needs the scorer's args")
        if self.generic_weight < 1:
            raise ValueError(f"generic_weight must be at least 1, got {self.generic_weight}")
        pct = self.percentage_of_nodes_to_score
        if pct is not None and not 0 < pct <= 100:
            raise ValueError(f"percentage_of_nodes_to_score must be in 1..100, got {pct}")

    def weights(self) -> dict[str, int]:
        """The score plugins in use and their weights."""
        out = dict(DEFAULT_WEIGHTS)
        if self.score == SCORE_GENERIC:
            del out["NodeResourcesFit"]
            del out["NodeResourcesBalancedAllocation"]
            out = {GENERIC_PLUGIN: self.generic_weight, **out}
        return out


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int | None = None) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind``: how many feasible nodes are looked for."""
    if num_all_nodes < MIN_FEASIBLE_NODES or (percentage is not None and percentage >= 100):
        return num_all_nodes
    if not percentage:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_PERCENTAGE)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES)


def fit_error_message(num_nodes: int, reasons: Mapping[str, int], prefix: str = "") -> str:
    """kube-scheduler's FitError text: ``0/N nodes are available: <count reason>, ... .``"""
    if num_nodes == 0:
        return "no nodes available to schedule pods"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    if not parts and not prefix:
        return f"0/{num_nodes} nodes are available."
    head = f"0/{num_nodes} nodes are available:"
    if prefix:
        head += f" {prefix}."
    if parts:
        head += " " + ", ".join(parts)
    return head + "."


# =============================================================================== small helpers


def _taint_reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def _condition_taints(node: Node) -> list[Taint]:
    """The NoSchedule taint the node lifecycle controller puts on a node that is not Ready."""
    for cond in node.status.conditions or ():
        if cond.type != "Ready" or cond.status == "True":
            continue
        key = _UNREACHABLE if cond.status == "Unknown" else _NOT_READY
        for t in node.spec.taints or ():
            if t.key == key and t.effect == k8s_taints.TAINT_NO_SCHEDULE:
                return []
        return [Taint(key=key, effect=k8s_taints.TAINT_NO_SCHEDULE)]
    return []


def _zone_key(labels: Mapping[str, str]) -> str:
    region = labels.get(_LABEL_REGION) or labels.get(_LABEL_REGION_BETA) or ""
    zone = labels.get(_LABEL_ZONE) or labels.get(_LABEL_ZONE_BETA) or ""
    return f"{region}:\x00:{zone}" if region or zone else ""


def scheduler_node_order(nodes: Iterable[Node]) -> list[Node]:
    """kube-scheduler's node tree order: round-robin over zones (in order of first appearance),
    nodes by name within a zone."""
    zones: dict[str, list[Node]] = {}
    for node in sorted(nodes, key=lambda n: n.metadata.name):
        zones.setdefault(_zone_key(node.metadata.labels or {}), []).append(node)
    out: list[Node] = []
    lists = list(zones.values())
    depth = max((len(z) for z in lists), default=0)
    for k in range(depth):
        for z in lists:
            if k < len(z):
                out.append(z[k])
    return out


def _required_node_affinity(pod: Pod) -> object:
    aff = pod.spec.affinity
    if aff is None or aff.node_affinity is None:
        return None
    return aff.node_affinity.required_during_scheduling_ignored_during_execution


def _affinity_shape(pod: Pod) -> bytes:
    return _encode((pod.spec.node_selector, _required_node_affinity(pod)))


def _has_node_constraint(pod: Pod) -> bool:
    return bool(pod.spec.node_selector) or _required_node_affinity(pod) is not None


def _required_terms(pod: Pod, anti: bool) -> list[PodAffinityTerm]:
    aff = pod.spec.affinity
    if aff is None:
        return []
    pa = aff.pod_anti_affinity if anti else aff.pod_affinity
    if pa is None:
        return []
    return pa.required_during_scheduling_ignored_during_execution or []


def _missing_cpu_or_memory(pod: Pod) -> bool:
    """Whether kube-scheduler's non-zero stand-ins could change the pod's cpu/memory requests."""
    spec = pod.spec
    if spec.resources is not None and spec.resources.requests:
        return True
    for group in (spec.containers, spec.init_containers or ()):
        for c in group:
            res = c.resources
            req = res.requests if res is not None else None
            if not req or CPU not in req or MEMORY not in req:
                return True
    return False


def _non_zero_cpu_memory(pod: Pod, requests: Mapping[str, int]) -> tuple[int, int]:
    if not _missing_cpu_or_memory(pod):
        return requests.get(CPU, 0), requests.get(MEMORY, 0)
    nz = k8s_resources.non_zero_pod_requests(pod)
    return nz.get(CPU, 0), nz.get(MEMORY, 0)


def _selector_text(sel: LabelSelector | None, extra: Sequence[tuple[str, str]] = ()) -> str:
    """A label selector as ``kubectl`` would write it."""
    if sel is None:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((sel.match_labels or {}).items())]
    for e in sel.match_expressions or ():
        values = ",".join(e.values or ())
        if e.operator == "In":
            parts.append(f"{e.key} in ({values})")
        elif e.operator == "NotIn":
            parts.append(f"{e.key} notin ({values})")
        elif e.operator == "Exists":
            parts.append(e.key)
        elif e.operator == "DoesNotExist":
            parts.append(f"!{e.key}")
        else:
            parts.append(f"{e.key} {e.operator} ({values})")
    parts.extend(f"{k}={v}" for k, v in extra)
    return ",".join(parts) or "<all>"


# =============================================================================== the cluster index


class _Counter:
    """Matching pods per topology domain for one spread constraint, kept as pods are placed.

    ``domains`` (shared between counters with the same eligible nodes and key, read-only) are
    the topology values of the eligible nodes; ``counts`` holds the domains with matching pods;
    ``hist`` how many domains have each count (0 included), from which the global minimum, the
    skew and the excess follow without a pass over the domains. ``node_map`` (made on demand by
    :meth:`by_node`, then kept in step) is the count of every node's domain, by node.
    """

    __slots__ = (
        "counts",
        "domains",
        "eligible",
        "hist",
        "key",
        "match",
        "min_count",
        "namespace",
        "node_map",
        "nodes_of",
    )

    def __init__(
        self, namespace: str, key: str, match: PodMatcher, eligible: list[bool], domains: Mapping[str, int]
    ) -> None:
        self.namespace = namespace
        self.key = key
        self.match = match
        self.eligible = eligible
        self.domains = domains
        self.counts: dict[str, int] = {}
        self.hist: Counter[int] = Counter()
        self.min_count = _BIG
        self.node_map: dict[int, int] | None = None
        self.nodes_of: Mapping[str, list[int]] = {}

    def finish(self) -> None:
        hist = Counter(self.counts.values())
        empty = len(self.domains) - len(self.counts)
        if empty:
            hist[0] = empty
        self.hist = hist
        self.min_count = min(hist) if hist else _BIG

    def increment(self, value: str) -> None:
        if value not in self.domains:
            return
        counts = self.counts
        c = counts.get(value, 0)
        counts[value] = c + 1
        hist = self.hist
        hist[c] -= 1
        if not hist[c]:
            del hist[c]
        hist[c + 1] += 1
        if c == self.min_count and c not in hist:
            self.min_count = c + 1
        node_map = self.node_map
        if node_map is not None:
            for j in self.nodes_of.get(value, ()):
                node_map[j] = c + 1

    def decrement(self, value: str) -> None:
        """A counted pod is gone."""
        if value not in self.domains:
            return
        counts = self.counts
        c = counts[value]
        if c == 1:
            del counts[value]
        else:
            counts[value] = c - 1
        hist = self.hist
        hist[c] -= 1
        if not hist[c]:
            del hist[c]
        hist[c - 1] += 1
        if c - 1 < self.min_count:
            self.min_count = c - 1
        node_map = self.node_map
        if node_map is not None:
            for j in self.nodes_of.get(value, ()):
                if c == 1:
                    del node_map[j]
                else:
                    node_map[j] = c - 1

    def by_node(self, nodes_of: Mapping[str, list[int]]) -> dict[int, int]:
        """The count of each node's domain, for the nodes in a domain with matching pods
        (``nodes_of``: the nodes by their value of the counter's key)."""
        node_map = self.node_map
        if node_map is None:
            node_map = self.node_map = {}
            self.nodes_of = nodes_of
            for value, count in self.counts.items():
                for j in nodes_of.get(value, ()):
                    node_map[j] = count
        return node_map

    def global_min(self, min_domains: int | None) -> int:
        if min_domains is not None and len(self.domains) < min_domains:
            return 0
        return self.min_count

    def skew(self, min_domains: int | None) -> int:
        if not self.hist:
            return 0
        return max(self.hist) - self.global_min(min_domains)

    def excess(self, min_domains: int | None, max_skew: int) -> int:
        """Pods above ``global minimum + maxSkew`` in their domain."""
        if not self.hist:
            return 0
        ceiling = self.global_min(min_domains) + max_skew
        return sum((c - ceiling) * k for c, k in self.hist.items() if c > ceiling)


class _TermIndex:
    """The occupying pods that match one pod (anti-)affinity term (namespaces + selector), by node;
    made on demand and then kept in step: how many per domain of a topology key (``domains``),
    and per node how many in its domain (``node_maps``)."""

    __slots__ = ("by_node", "domains", "match", "namespaces", "node_maps", "node_sets")

    def __init__(self, namespaces: frozenset[str], match: Matcher) -> None:
        self.namespaces = namespaces
        self.match = match
        self.by_node: dict[int, list[Pod]] = {}
        self.domains: dict[str, dict[str, int]] = {}
        self.node_maps: dict[str, tuple[Mapping[str, list[int]], dict[int, int]]] = {}
        self.node_sets: dict[str, tuple[Mapping[str, list[int]], set[int]]] = {}

    def matches(self, pod: Pod) -> bool:
        return pod.metadata.namespace in self.namespaces and self.match(pod.metadata.labels or {})

    def add(self, pod: Pod, i: int, node_labels: Mapping[str, str]) -> None:
        """A matching pod bound to node ``i``."""
        self.by_node.setdefault(i, []).append(pod)
        for key, counts in self.domains.items():
            value = node_labels.get(key)
            if value is not None:
                counts[value] = counts.get(value, 0) + 1
        for key, (nodes_of, node_map) in self.node_maps.items():
            value = node_labels.get(key)
            if value is not None:
                for j in nodes_of.get(value, ()):
                    node_map[j] = node_map.get(j, 0) + 1
        for key, (nodes_of, nodes) in self.node_sets.items():
            value = node_labels.get(key)
            if value is not None:
                domain = nodes_of.get(value, ())
                if domain and domain[0] not in nodes:
                    nodes.update(domain)

    def remove(self, pod: Pod, i: int, node_labels: Mapping[str, str]) -> None:
        """A matching pod on node ``i`` is gone."""
        pods = self.by_node[i]
        for k, q in enumerate(pods):
            if q is pod:
                del pods[k]
                break
        if not pods:
            del self.by_node[i]
        for key, counts in self.domains.items():
            value = node_labels.get(key)
            if value is not None:
                if counts[value] == 1:
                    del counts[value]
                else:
                    counts[value] -= 1
        # made again on demand
        self.node_maps = {}
        self.node_sets = {}

    def domain_counts(self, key: str, labels: Sequence[Mapping[str, str]]) -> dict[str, int]:
        """The matching pods per value of topology key ``key`` (only values with pods)."""
        counts = self.domains.get(key)
        if counts is None:
            counts = self.domains[key] = {}
            for i, pods in self.by_node.items():
                value = labels[i].get(key)
                if value is not None:
                    counts[value] = counts.get(value, 0) + len(pods)
        return counts

    def nodes_in_domains(
        self, key: str, labels: Sequence[Mapping[str, str]], nodes_of: Mapping[str, list[int]]
    ) -> set[int]:
        """The nodes in a domain of ``key`` with matching pods."""
        hit = self.node_sets.get(key)
        if hit is None:
            nodes: set[int] = set()
            for value in self.domain_counts(key, labels):
                nodes.update(nodes_of.get(value, ()))
            hit = self.node_sets[key] = (nodes_of, nodes)
        return hit[1]

    def by_node_of(
        self, key: str, labels: Sequence[Mapping[str, str]], nodes_of: Mapping[str, list[int]]
    ) -> dict[int, int]:
        """Per node in a domain of ``key`` with matching pods: how many there are in it."""
        hit = self.node_maps.get(key)
        if hit is None:
            node_map: dict[int, int] = {}
            for value, count in self.domain_counts(key, labels).items():
                for j in nodes_of.get(value, ()):
                    node_map[j] = count
            hit = self.node_maps[key] = (nodes_of, node_map)
        return hit[1]


@dataclass(frozen=True, slots=True)
class _Constraint:
    counter: _Counter
    key: str
    max_skew: int
    min_domains: int | None
    self_match: int
    when: str


class _Cluster:
    """Nodes in kube-scheduler's order and everything the checks read, with memos per pod shape."""

    def __init__(self, snapshot: ClusterSnapshot, nodes: Sequence[Node] | None = None) -> None:
        self.snapshot = snapshot
        self.nodes: list[Node] = scheduler_node_order(snapshot.nodes if nodes is None else nodes)
        self.n = len(self.nodes)
        self.names: list[str] = [n.metadata.name for n in self.nodes]
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self.labels: list[Mapping[str, str]] = [n.metadata.labels or {} for n in self.nodes]
        self.unschedulable: list[bool] = [n.spec.unschedulable for n in self.nodes]
        sigs: dict[bytes, int] = {}
        self.sig_taints: list[tuple[Taint, ...]] = []
        self.taint_sig: list[int] = []
        for node in self.nodes:
            taints = (*(node.spec.taints or ()), *_condition_taints(node))
            enc = _encode(taints)
            sig = sigs.get(enc)
            if sig is None:
                sig = sigs[enc] = len(self.sig_taints)
                self.sig_taints.append(taints)
            self.taint_sig.append(sig)
        self.prefer_no_schedule = any(
            t.effect == k8s_taints.TAINT_PREFER_NO_SCHEDULE for ts in self.sig_taints for t in ts
        )
        self._static: dict[bytes, tuple[list[str], list[int]]] = {}
        self._values: dict[str, list[str | None]] = {}
        self._nodes_by_value: dict[str, dict[str, list[int]]] = {}
        self._all_have: dict[str, bool] = {}
        self._signatures: dict[tuple[object, ...], tuple[list[int], list[tuple[object, ...]]]] = {}
        self._fine: dict[str, bool] = {}
        self._templates: dict[tuple[int, str], dict[str, int]] = {}
        self._preferred: dict[bytes, list[int]] = {}
        self._prefer_no_schedule: dict[bytes, list[int]] = {}
        self._eligible: dict[tuple[object, ...], list[bool]] = {}
        self._counters: dict[tuple[object, ...], _Counter] = {}
        #: counters and term indexes by the pods that can change them: ("owner", ns, kind, name),
        #: ("pair", ns, label, value) for the first of their matchLabels, else ("ns", ns)
        self._counter_buckets: dict[tuple[str, ...], list[_Counter]] = {}
        self._terms: dict[tuple[object, ...], _TermIndex] = {}
        self._term_buckets: dict[tuple[str, ...], list[_TermIndex]] = {}
        #: per namespace, the label keys of its ("pair", ...) buckets
        self._pair_keys: dict[str, set[str]] = {}
        self._spread_cache: dict[bytes, list[_Constraint]] = {}
        self._label_index: dict[tuple[str, str], dict[str, list[Pod]]] = {}
        self._label_keys: dict[str, list[str]] = {}
        self._ns_pods: dict[str, list[Pod]] = {}
        self._with_keys: dict[tuple[bytes, tuple[str, ...]], list[int]] = {}
        self._ns_labels: dict[str, Mapping[str, str]] | None = None
        self._term_ns: dict[tuple[str, bytes], frozenset[str]] = {}

    # ---------------------------------------------------------------- static filters

    def static_reasons(self, pod: Pod) -> tuple[list[str], list[int]]:
        """Per node (in order): why NodeUnschedulable, TaintToleration or NodeAffinity reject the
        pod, "" when they pass; and the nodes that pass. Memoised per shape (node selector, node
        affinity, tolerations)."""
        spec = pod.spec
        required = _required_node_affinity(pod)
        shape = _encode((spec.node_selector, required, spec.tolerations))
        hit = self._static.get(shape)
        if hit is not None:
            return hit
        tolerations = spec.tolerations
        tolerates_cordon = k8s_taints.tolerates_taint(tolerations, _UNSCHEDULABLE_TAINT)
        check_affinity = bool(spec.node_selector) or required is not None
        by_sig: dict[int, str] = {}
        out: list[str] = []
        for i, node in enumerate(self.nodes):
            if self.unschedulable[i] and not tolerates_cordon:
                out.append(R_UNSCHEDULABLE)
                continue
            sig = self.taint_sig[i]
            reason = by_sig.get(sig)
            if reason is None:
                taint = k8s_taints.untolerated_taint(self.sig_taints[sig], tolerations, _SCHED_EFFECTS)
                reason = by_sig[sig] = "" if taint is None else _taint_reason(taint)
            if reason:
                out.append(reason)
            elif check_affinity and not k8s_affinity.pod_matches_node_selector(pod, node):
                out.append(R_NODE_AFFINITY)
            else:
                out.append("")
        result = (out, [i for i, r in enumerate(out) if not r])
        self._static[shape] = result
        return result

    def passing_with_keys(self, pod: Pod, keys: tuple[str, ...]) -> list[int]:
        """The nodes passing the static filters that carry every label of ``keys``."""
        passing = self.static_reasons(pod)[1]
        if not keys:
            return passing
        spec = pod.spec
        key = (_encode((spec.node_selector, _required_node_affinity(pod), spec.tolerations)), keys)
        hit = self._with_keys.get(key)
        if hit is None:
            labels = self.labels
            hit = self._with_keys[key] = [i for i in passing if all(k in labels[i] for k in keys)]
        return hit

    def nodes_by_value(self, key: str) -> dict[str, list[int]]:
        """The nodes carrying label ``key``, by its value."""
        hit = self._nodes_by_value.get(key)
        if hit is None:
            hit = {}
            for i, value in enumerate(self.values_of(key)):
                if value is not None:
                    hit.setdefault(value, []).append(i)
            self._nodes_by_value[key] = hit
        return hit

    def all_have(self, key: str) -> bool:
        """Whether every node carries label ``key``."""
        hit = self._all_have.get(key)
        if hit is None:
            hit = self._all_have[key] = all(key in labels for labels in self.labels)
        return hit

    def fine(self, key: str) -> bool:
        """Whether the domains of ``key`` hold about one node each (as hostnames do): then counts
        per domain are best kept per node."""
        hit = self._fine.get(key)
        if hit is None:
            by_value = self.nodes_by_value(key)
            hit = self._fine[key] = sum(map(len, by_value.values())) <= 2 * len(by_value)
        return hit

    def signatures(
        self, shape: tuple[object, ...], components: Sequence[Sequence[object]]
    ) -> tuple[list[int], list[tuple[object, ...]]]:
        """Per node, the index of its tuple of ``components`` (per-node lists) in the list of
        distinct tuples; memoised per ``shape`` (what the components are)."""
        hit = self._signatures.get(shape)
        if hit is None:
            ids: dict[tuple[object, ...], int] = {}
            if components:
                sig = [ids.setdefault(row, len(ids)) for row in zip(*components, strict=True)]
            else:
                sig = [0] * self.n
                ids[()] = 0
            hit = self._signatures[shape] = (sig, list(ids))
        return hit

    def values_of(self, key: str) -> list[str | None]:
        """Per node: the value of label ``key`` (None when the node lacks it)."""
        hit = self._values.get(key)
        if hit is None:
            hit = self._values[key] = [labels.get(key) for labels in self.labels]
        return hit

    def preferred_node_affinity(self, pod: Pod) -> list[int]:
        """Per node: the weights of the pod's matching preferred node-affinity terms (memoised
        per set of terms)."""
        aff = pod.spec.affinity
        terms = (
            aff.node_affinity.preferred_during_scheduling_ignored_during_execution
            if aff and aff.node_affinity
            else None
        )
        key = _encode(terms)
        hit = self._preferred.get(key)
        if hit is None:
            hit = self._preferred[key] = [
                k8s_affinity.preferred_node_affinity_score(pod, node) for node in self.nodes
            ]
        return hit

    def prefer_no_schedule_counts(self, tolerations: Sequence[Toleration] | None) -> list[int]:
        """Per node: the PreferNoSchedule taints the tolerations do not tolerate."""
        key = _encode(tolerations)
        hit = self._prefer_no_schedule.get(key)
        if hit is None:
            hit = self._prefer_no_schedule[key] = self._prefer_no_schedule_counts(tolerations)
        return hit

    def _prefer_no_schedule_counts(self, tolerations: Sequence[Toleration] | None) -> list[int]:
        relevant = [t for t in tolerations or () if t.effect in ("", k8s_taints.TAINT_PREFER_NO_SCHEDULE)]
        by_sig = [
            sum(
                1
                for t in taints
                if t.effect == k8s_taints.TAINT_PREFER_NO_SCHEDULE
                and not k8s_taints.tolerates_taint(relevant, t)
            )
            for taints in self.sig_taints
        ]
        return [by_sig[s] for s in self.taint_sig]

    # ---------------------------------------------------------------- pods by namespace and label

    def _namespace_pods(self, namespace: str) -> list[Pod]:
        pods = self._ns_pods.get(namespace)
        if pods is None:
            pods = self._ns_pods[namespace] = self.snapshot.pods_in_namespace(namespace)
        return pods

    def _by_label(self, namespace: str, key: str) -> dict[str, list[Pod]]:
        """The namespace's pods by their value of label ``key``."""
        index = self._label_index.get((namespace, key))
        if index is None:
            index = {}
            for p in self._namespace_pods(namespace):
                labels = p.metadata.labels
                if labels:
                    value = labels.get(key)
                    if value is not None:
                        index.setdefault(value, []).append(p)
            self._label_index[(namespace, key)] = index
            self._label_keys.setdefault(namespace, []).append(key)
        return index

    def candidates(self, namespace: str, selector: LabelSelector | None) -> Sequence[Pod]:
        """The namespace's pods a selector could match, narrowed by the label index: by one of
        its matchLabels, or by an ``In`` expression (the union of its values' pods)."""
        if selector is not None:
            if selector.match_labels:
                key, value = min(selector.match_labels.items())
                return self._by_label(namespace, key).get(value, [])
            for expr in selector.match_expressions or ():
                if expr.operator == "In" and expr.values:
                    index = self._by_label(namespace, expr.key)
                    lists = [index.get(v, []) for v in sorted(set(expr.values))]
                    return lists[0] if len(lists) == 1 else [p for pods in lists for p in pods]
        return self._namespace_pods(namespace)

    @property
    def namespace_labels(self) -> Mapping[str, Mapping[str, str]]:
        if self._ns_labels is None:
            out: dict[str, Mapping[str, str]] = {}
            for p in self.snapshot.iter_pods():
                ns = p.metadata.namespace
                if ns not in out:
                    out[ns] = {k8s_affinity.NAMESPACE_NAME_LABEL: ns}
            for ns_obj in self.snapshot.namespaces:
                name = ns_obj.metadata.name
                out[name] = {**(ns_obj.metadata.labels or {}), k8s_affinity.NAMESPACE_NAME_LABEL: name}
            self._ns_labels = out
        return self._ns_labels

    def term_namespaces(self, pod: Pod, term: PodAffinityTerm) -> frozenset[str]:
        if term.namespace_selector is None:
            return frozenset(term.namespaces or ()) or frozenset((pod.metadata.namespace,))
        key = (pod.metadata.namespace, _encode((term.namespaces, term.namespace_selector)))
        hit = self._term_ns.get(key)
        if hit is None:
            hit = self._term_ns[key] = k8s_affinity.pod_affinity_term_namespaces(
                pod, term, self.namespace_labels
            )
        return hit

    def term_index(self, pod: Pod, term: PodAffinityTerm) -> _TermIndex:
        """The index of the pods matching ``term`` (declared by ``pod``). Raises SelectorError."""
        namespaces = self.term_namespaces(pod, term)
        key = (tuple(sorted(namespaces)), _encode(term.label_selector))
        hit = self._terms.get(key)
        if hit is not None:
            return hit
        match = k8s_labels.compile_label_selector(term.label_selector, none_matches=False)
        ti = _TermIndex(namespaces, match)
        index = self.index
        for ns in sorted(namespaces):
            for p in self.candidates(ns, term.label_selector):
                i = index.get(p.spec.node_name)
                if i is not None and k8s_pods.occupies_node(p) and match(p.metadata.labels or {}):
                    ti.by_node.setdefault(i, []).append(p)
            self._register(self._term_buckets, _bucket(ns, term.label_selector), ti)
        self._terms[key] = ti
        return ti

    # ---------------------------------------------------------------- topology spread

    def eligible(
        self, pod: Pod, required_keys: tuple[str, ...], c: TopologySpreadConstraint | None
    ) -> list[bool]:
        """Per node: whether it is a domain of the pod's constraint (has every required key and
        passes the node inclusion policies)."""
        honor_affinity = c is None or (c.node_affinity_policy or _HONOR) == _HONOR
        honor_taints = c is not None and c.node_taints_policy == _HONOR
        key = (
            required_keys,
            _affinity_shape(pod) if honor_affinity and _has_node_constraint(pod) else None,
            _encode(pod.spec.tolerations) if honor_taints else None,
        )
        hit = self._eligible.get(key)
        if hit is not None:
            return hit
        by_sig: dict[int, bool] = {}
        out: list[bool] = []
        check_affinity = key[1] is not None
        for i, node in enumerate(self.nodes):
            labels = self.labels[i]
            ok = all(k in labels for k in required_keys)
            if ok and check_affinity:
                ok = k8s_affinity.pod_matches_node_selector(pod, node)
            if ok and honor_taints:
                sig = self.taint_sig[i]
                tolerated = by_sig.get(sig)
                if tolerated is None:
                    tolerated = by_sig[sig] = (
                        k8s_taints.untolerated_taint(
                            self.sig_taints[sig], pod.spec.tolerations, _SCHED_EFFECTS
                        )
                        is None
                    )
                ok = tolerated
            out.append(ok)
        self._eligible[key] = out
        return out

    def _counter(
        self,
        key: tuple[object, ...],
        namespace: str,
        topology_key: str,
        match: PodMatcher,
        eligible: list[bool],
        candidates: Callable[[], Iterable[Pod]],
        bucket: tuple[str, ...],
        all_match: bool = False,
    ) -> _Counter:
        """The counter of ``key``, made from ``candidates`` (a superset of the matching pods;
        ``all_match``: all of them match) when there is none yet."""
        hit = self._counters.get(key)
        if hit is not None:
            return hit
        labels = self.labels
        template_key = (id(eligible), topology_key)
        domains = self._templates.get(template_key)
        if domains is None:
            domains = {}
            for value, ok in zip(self.values_of(topology_key), eligible, strict=True):
                if ok and value is not None:
                    domains[value] = 0
            self._templates[template_key] = domains
        counter = _Counter(namespace, topology_key, match, eligible, domains)
        counts = counter.counts
        index_get = self.index.get
        for p in candidates():
            at = index_get(p.spec.node_name)
            if (
                at is None
                or not eligible[at]
                or p.status.phase in _FINISHED
                or p.metadata.deletion_timestamp is not None
                or not (all_match or match(p))
            ):
                continue
            value = labels[at].get(topology_key)
            if value is not None and value in domains:
                counts[value] = counts.get(value, 0) + 1
        counter.finish()
        self._counters[key] = counter
        self._register(self._counter_buckets, bucket, counter)
        return counter

    def spread_constraints(self, pod: Pod, when: str) -> list[_Constraint]:
        """The pod's constraints of one ``whenUnsatisfiable`` kind, with their domain counters.
        Raises SelectorError for an invalid selector."""
        tscs = [c for c in pod.spec.topology_spread_constraints or () if c.when_unsatisfiable == when]
        if not tscs:
            return []
        spec = pod.spec
        cache_key = _encode(
            (
                when,
                pod.metadata.namespace,
                tscs,
                pod.metadata.labels,
                spec.node_selector,
                _required_node_affinity(pod),
                spec.tolerations,
            )
        )
        hit = self._spread_cache.get(cache_key)
        if hit is not None:
            return hit
        hit = self._spread_cache[cache_key] = self._spread_constraints(pod, when, tscs)
        return hit

    def _spread_constraints(
        self, pod: Pod, when: str, tscs: list[TopologySpreadConstraint]
    ) -> list[_Constraint]:
        required = tuple(sorted({c.topology_key for c in tscs}))
        namespace = pod.metadata.namespace
        labels = pod.metadata.labels or {}
        out: list[_Constraint] = []
        for c in tscs:
            selector = k8s_labels.compile_label_selector(c.label_selector, none_matches=False)
            extra = tuple((k, labels[k]) for k in c.match_label_keys or () if k in labels)
            match = _spread_matcher(selector, extra)
            eligible = self.eligible(pod, required, c)
            key = ("sel", namespace, _encode(c.label_selector), extra, c.topology_key, id(eligible))
            counter = self._counter(
                key,
                namespace,
                c.topology_key,
                match,
                eligible,
                self._candidates_of(namespace, c.label_selector),
                _bucket(namespace, c.label_selector),
            )
            out.append(
                _Constraint(counter, c.topology_key, c.max_skew, c.min_domains, 1 if match(pod) else 0, when)
            )
        return out

    def _candidates_of(self, namespace: str, selector: LabelSelector | None) -> Callable[[], Iterable[Pod]]:
        return lambda: self.candidates(namespace, selector)

    def default_spread_constraints(self, pod: Pod) -> list[_Constraint]:
        """kube-scheduler's system-default ScheduleAnyway constraints, over the pods of the same
        owner (standing in for the selectors of the owning ReplicaSet/StatefulSet/Service)."""
        ref = k8s_pods.controller_ref(pod)
        if ref is None or ref.kind not in _DEFAULT_SPREAD_OWNERS:
            return []
        namespace = pod.metadata.namespace
        kind, name = ref.kind, ref.name
        cache_key = _encode(("default", namespace, kind, name, _affinity_shape(pod)))
        hit = self._spread_cache.get(cache_key)
        if hit is not None:
            return hit

        def same_owner(p: Pod) -> bool:
            return p.metadata.namespace == namespace and any(
                r.kind == kind and r.name == name for r in p.metadata.owner_references or ()
            )

        out: list[_Constraint] = []
        for topology_key, max_skew in _SYSTEM_DEFAULT_SPREAD:
            eligible = self.eligible(pod, (topology_key,), None)
            key = ("owner", namespace, kind, name, topology_key, id(eligible))
            counter = self._counter(
                key,
                namespace,
                topology_key,
                same_owner,
                eligible,
                lambda: self.snapshot.pods_of_owner(namespace, kind, name),
                ("owner", namespace, kind, name),
                all_match=True,  # the snapshot's pods of the owner
            )
            out.append(_Constraint(counter, topology_key, max_skew, None, 1, _SCHEDULE_ANYWAY))
        self._spread_cache[cache_key] = out
        return out

    # ---------------------------------------------------------------- incremental updates

    def _register(self, buckets: dict[tuple[str, ...], list[_T]], bucket: tuple[str, ...], item: _T) -> None:
        buckets.setdefault(bucket, []).append(item)
        if bucket[0] == "pair":
            self._pair_keys.setdefault(bucket[1], set()).add(bucket[2])

    def _buckets(self, ns: str, labels: Mapping[str, str]) -> list[tuple[str, ...]]:
        """The namespace's and label pairs' buckets a pod with ``labels`` falls in."""
        out: list[tuple[str, ...]] = [("ns", ns)]
        keys = self._pair_keys.get(ns)
        if keys:
            out.extend(("pair", ns, k, labels[k]) for k in keys if k in labels)
        return out

    def pod_changed(self, pod: Pod, i: int, added: bool) -> None:
        """Keep the spread counters and term indexes in step with a pod on node ``i`` that came
        (``added``) or went, as a fresh index would count it. The caches of pods by namespace
        and label must be dropped first (:meth:`forget_pods`)."""
        if not k8s_pods.occupies_node(pod):
            return
        ns = pod.metadata.namespace
        labels = pod.metadata.labels or {}
        buckets = self._buckets(ns, labels)
        owners = {("owner", ns, r.kind, r.name) for r in pod.metadata.owner_references or ()}
        node_labels = self.labels[i]
        if pod.metadata.deletion_timestamp is None:
            for bucket in chain(buckets, owners):
                for counter in self._counter_buckets.get(bucket, ()):
                    if counter.eligible[i] and counter.match(pod):
                        value = node_labels.get(counter.key)
                        if value is not None:
                            if added:
                                counter.increment(value)
                            else:
                                counter.decrement(value)
        for bucket in buckets:
            for ti in self._term_buckets.get(bucket, ()):
                if ti.match(labels):
                    if added:
                        ti.add(pod, i, node_labels)
                    else:
                        ti.remove(pod, i, node_labels)

    def pod_terminating(self, pod: Pod, i: int) -> None:
        """``pod`` on node ``i`` is now terminating: spread constraints no longer count it
        (kube-scheduler skips pods with a deletionTimestamp there, and only there). The caches
        of pods by namespace and label must be dropped first (:meth:`forget_pods`)."""
        if not k8s_pods.occupies_node(pod) or pod.metadata.deletion_timestamp is not None:
            return
        ns = pod.metadata.namespace
        owners = {("owner", ns, r.kind, r.name) for r in pod.metadata.owner_references or ()}
        value_of = self.labels[i].get
        for bucket in chain(self._buckets(ns, pod.metadata.labels or {}), owners):
            for counter in self._counter_buckets.get(bucket, ()):
                if counter.eligible[i] and counter.match(pod):
                    value = value_of(counter.key)
                    if value is not None:
                        counter.decrement(value)

    def forget_pods(self) -> None:
        """Drop the pods by namespace and label (made again from the snapshot on demand)."""
        self._ns_pods = {}
        self._label_index = {}
        self._label_keys = {}

    def pod_added(self, pod: Pod, i: int) -> None:
        """Keep the indexes in step with a pod bound to node ``i``."""
        ns = pod.metadata.namespace
        labels = pod.metadata.labels or {}
        pods = self._ns_pods.get(ns)
        if pods is not None:
            pods.append(pod)
        for key in self._label_keys.get(ns, ()):
            value = labels.get(key)
            if value is not None:
                self._label_index[(ns, key)].setdefault(value, []).append(pod)
        if not k8s_pods.occupies_node(pod):
            return
        buckets = self._buckets(ns, labels)
        node_labels = self.labels[i]
        counters = self._counter_buckets
        terms = self._term_buckets
        live = pod.metadata.deletion_timestamp is None
        for bucket in (
            *buckets,
            *(("owner", ns, r.kind, r.name) for r in pod.metadata.owner_references or ()),
        ):
            for counter in counters.get(bucket, ()):
                if live and counter.eligible[i] and counter.match(pod):
                    value = node_labels.get(counter.key)
                    if value is not None:
                        counter.increment(value)
        for bucket in buckets:
            for ti in terms.get(bucket, ()):
                if ti.match(labels):
                    ti.add(pod, i, node_labels)


def _bucket(namespace: str, selector: LabelSelector | None) -> tuple[str, ...]:
    """Which pods can match ``selector``: those with its first matchLabels pair, else any."""
    if selector is not None and selector.match_labels:
        k, v = min(selector.match_labels.items())
        return ("pair", namespace, k, v)
    return ("ns", namespace)


def _spread_matcher(selector: Matcher, extra: tuple[tuple[str, str], ...]) -> PodMatcher:
    if not extra:
        return lambda p: selector(p.metadata.labels or {})

    def match(p: Pod) -> bool:
        labels = p.metadata.labels or {}
        for k, v in extra:
            if labels.get(k) != v:
                return False
        return selector(labels)

    return match


# =============================================================================== the simulator


class _AntiGroup:
    """Existing pods' required anti-affinity terms that are alike, and where those pods sit: the
    domains (``values``: pods per value of the topology key) and the nodes in them."""

    __slots__ = ("key", "match", "nodes", "nodes_of", "values")

    def __init__(self, key: str, match: Matcher, nodes_of: Mapping[str, list[int]]) -> None:
        self.key = key
        self.match = match
        self.nodes_of = nodes_of
        self.values: Counter[str] = Counter()
        self.nodes: set[int] = set()

    def add(self, value: str) -> None:
        if not self.values[value]:
            self.nodes.update(self.nodes_of.get(value, ()))
        self.values[value] += 1

    def remove(self, value: str) -> None:
        self.values[value] -= 1
        if not self.values[value]:
            del self.values[value]
            self.nodes.difference_update(self.nodes_of.get(value, ()))


@dataclass(frozen=True, slots=True)
class Decision:
    """Where kube-scheduler would bind one pod, or why it would stay Pending."""

    #: The node, "" when no node is feasible.
    node: str
    #: kube-scheduler's FitError message when pending.
    reason: str = ""
    #: The winning node's total score (the weighted sum of the plugins' 0..100 scores).
    score: int | None = None
    #: Feasible nodes found (and scored).
    feasible: int = 0


#: A request of 0 always fits, even on an overcommitted node: compare against this instead.
_NO_REQUEST: Final = -_BIG
#: Resources NodeResourcesFit checks by name; every other requested resource is a "scalar" one.
_BASIC_RESOURCES: Final = frozenset((CPU, MEMORY, EPHEMERAL_STORAGE, PODS))
#: Pods placed between two progress reports.
_PROGRESS_EVERY: Final = 64
#: Below this many nodes, a set of them is built rather than a check per node searched.
_SMALL_SET: Final = 256
#: Request classes whose lists of fitting nodes are kept.
_FIT_CLASSES: Final = 1024
#: Request classes whose per-node resource scores are kept (replicas of a workload share one).
_RESOURCE_CACHE_CLASSES: Final = 256


class _FitClass:
    """A request class's fitting nodes (ascending), its cpu, memory and ephemeral-storage
    requests (``_NO_REQUEST`` for none) and its extended-resource requests."""

    __slots__ = ("nodes", "requests", "scalar")

    def __init__(
        self, nodes: list[int], requests: tuple[int, int, int], scalar: list[tuple[str, int]]
    ) -> None:
        self.nodes = nodes
        self.requests = requests
        self.scalar = scalar


def _class_key(pod: Pod) -> bytes:
    """Everything the filters and scores read of a pod (its *class*: the replicas of a workload
    share one)."""
    meta = pod.metadata
    spec = pod.spec
    return _encode(
        (
            meta.namespace,
            meta.labels,
            meta.owner_references,
            spec.node_selector,
            spec.affinity,
            spec.tolerations,
            spec.topology_spread_constraints,
            [c.resources for c in spec.containers],
            [(c.restart_policy, c.resources) for c in spec.init_containers or ()],
            spec.overhead,
            spec.resources,
        )
    )


class _PodClass:
    """What the filters and scores take from a pod alone, shared by the pods of one class: its
    requests, the static filters' verdicts, the spread counters and term indexes it reads (live
    objects, kept in step as pods are bound), or the invalid selector that leaves it Pending."""

    __slots__ = (
        "_na",
        "_plan",
        "_pns",
        "affinity_indexes",
        "affinity_keys",
        "affinity_terms",
        "anti_groups",
        "anti_seen",
        "best_effort",
        "cpu",
        "eph",
        "error",
        "fit_key",
        "hard",
        "labels",
        "mem",
        "namespace",
        "nz_cpu",
        "nz_mem",
        "own_anti",
        "passing",
        "pod",
        "preferred",
        "scalar",
        "self_affine",
        "soft",
        "soft_defaulted",
        "static",
    )

    def __init__(self, c: _Cluster, pod: Pod) -> None:
        self.pod = pod  # the first pod of the class: what the per-node memos are computed from
        self.namespace = pod.metadata.namespace
        self.labels: Mapping[str, str] = pod.metadata.labels or {}
        self.static = c.static_reasons(pod)[0]
        req = k8s_resources.pod_requests(pod)
        self.cpu = req.get(CPU, 0)
        self.mem = req.get(MEMORY, 0)
        self.eph = req.get(EPHEMERAL_STORAGE, 0)
        self.scalar = sorted(
            (name, amount) for name, amount in req.items() if amount > 0 and name not in _BASIC_RESOURCES
        )
        self.nz_cpu, self.nz_mem = _non_zero_cpu_memory(pod, req)
        self.best_effort = self.cpu == 0 and self.mem == 0
        self.error: k8s_labels.SelectorError | None = None
        self.hard: list[_Constraint] = []
        self.soft: list[_Constraint] = []
        self.soft_defaulted = False
        #: existing pods' anti-affinity groups of the namespace that match the pod, of the first
        #: ``anti_seen`` groups there (groups are only ever added)
        self.anti_groups: list[_AntiGroup] = []
        self.anti_seen = 0
        self.own_anti: list[tuple[_TermIndex, str]] = []
        self.affinity_terms: list[PodAffinityTerm] = []
        self.affinity_indexes: list[_TermIndex] = []
        self.affinity_keys: list[str] = []
        self.self_affine = False
        self.passing: list[int] = []
        self.fit_key: tuple[object, ...] = ()
        self.preferred: list[tuple[_TermIndex, str, int]] = []
        self._pns: list[int] | None = None
        self._na: list[int] | None = None
        self._plan: _ScorePlan | None = None
        try:
            self.hard = c.spread_constraints(pod, _DO_NOT_SCHEDULE)
            self.soft = c.spread_constraints(pod, _SCHEDULE_ANYWAY)
            if not pod.spec.topology_spread_constraints:
                self.soft = c.default_spread_constraints(pod)
                self.soft_defaulted = bool(self.soft)
            self.own_anti = [(c.term_index(pod, t), t.topology_key) for t in _required_terms(pod, anti=True)]
            terms = _required_terms(pod, anti=False)
            self.affinity_keys = [t.topology_key for t in terms]
            if terms:
                self.affinity_terms = terms
                self.affinity_indexes = [c.term_index(pod, t) for t in terms]
                self.self_affine = all(ti.matches(pod) for ti in self.affinity_indexes)
        except k8s_labels.SelectorError as e:
            self.error = e
            return
        self.passing = c.passing_with_keys(pod, tuple(sorted({con.key for con in self.hard})))
        self.fit_key = (id(self.passing), self.cpu, self.mem, self.eph, tuple(self.scalar))
        aff = pod.spec.affinity
        if aff is not None:
            for sign, pa in ((1, aff.pod_affinity), (-1, aff.pod_anti_affinity)):
                if pa is None:
                    continue
                for wt in pa.preferred_during_scheduling_ignored_during_execution or ():
                    if wt.weight == 0:
                        continue
                    term = wt.pod_affinity_term
                    try:
                        ti = c.term_index(pod, term)
                    except k8s_labels.SelectorError:
                        continue
                    self.preferred.append((ti, term.topology_key, sign * wt.weight))

    def existing_anti_groups(self, by_ns: Mapping[str, list[_AntiGroup]]) -> list[_AntiGroup]:
        groups = by_ns.get(self.namespace, ())
        if len(groups) > self.anti_seen:
            labels = self.labels
            self.anti_groups.extend(g for g in groups[self.anti_seen :] if g.match(labels))
            self.anti_seen = len(groups)
        return self.anti_groups

    def score_plan(self, sim: PlacementSimulator) -> _ScorePlan:
        if self._plan is None:
            self._plan = _ScorePlan(sim.cluster, self, sim._weights)
        return self._plan

    def prefer_no_schedule(self, c: _Cluster) -> list[int]:
        """Per node: the PreferNoSchedule taints the pod does not tolerate."""
        if self._pns is None:
            self._pns = c.prefer_no_schedule_counts(self.pod.spec.tolerations)
        return self._pns

    def preferred_node_affinity(self, c: _Cluster) -> list[int]:
        """Per node: the weights of the pod's matching preferred node-affinity terms."""
        if self._na is None:
            self._na = c.preferred_node_affinity(self.pod)
        return self._na


class PlacementSimulator:
    """kube-scheduler's filters and scores over one snapshot, kept up to date as pods are bound.

    Use :meth:`decide` for a pod, then :meth:`bind` the pod (with ``spec.nodeName`` set) to make
    the placement count for the pods after it.
    """

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        options: PlacementOptions | None = None,
        *,
        nodes: Sequence[Node] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.options = options or PlacementOptions()
        self.cluster = c = _Cluster(snapshot, nodes)
        self._start = 0
        #: where the latest search started (the feasible nodes it found are in order from there)
        self._search_start = 0
        self._to_find = num_feasible_nodes_to_find(c.n, self.options.percentage_of_nodes_to_score)
        self._weights = self.options.weights()
        self._generic = (
            GenericScorer(self.options.generic)
            if self.options.score == SCORE_GENERIC and self.options.generic is not None
            else None
        )
        n = c.n
        self.alloc: list[Resources] = [snapshot.allocatable(node) for node in c.nodes]
        self.alloc_cpu = [a.get(CPU, 0) for a in self.alloc]
        self.alloc_mem = [a.get(MEMORY, 0) for a in self.alloc]
        self.alloc_eph = [a.get(EPHEMERAL_STORAGE, 0) for a in self.alloc]
        self.alloc_pods = [a.get(PODS, 0) for a in self.alloc]
        # what the pods occupying the node request: raw (the filter, BalancedAllocation; the
        # snapshot keeps these sums) and with kube-scheduler's non-zero stand-ins
        # (NonZeroRequested: LeastAllocated)
        used = [snapshot.requested_on(name) for name in c.names]
        self.req_cpu = [u.get(CPU, 0) for u in used]
        self.req_mem = [u.get(MEMORY, 0) for u in used]
        self.req_eph = [u.get(EPHEMERAL_STORAGE, 0) for u in used]
        self.pod_count = [snapshot.pod_count_on(name) for name in c.names]
        self.req_scalar: list[dict[str, int]] = [
            {k: v for k, v in u.items() if k not in _BASIC_RESOURCES} for u in used
        ]
        self.nz_cpu = list(self.req_cpu)
        self.nz_mem = list(self.req_mem)
        self._anti_groups: dict[tuple[object, ...], _AntiGroup] = {}
        self._anti_by_ns: dict[str, list[_AntiGroup]] = {}
        self._anti_terms: dict[bytes, list[tuple[str, _AntiGroup]]] = {}
        index_get = c.index.get
        requests = snapshot.requests
        nz_cpu, nz_mem = self.nz_cpu, self.nz_mem
        for pod in snapshot.iter_pods():
            spec = pod.spec
            at = index_get(spec.node_name)
            if at is None or pod.status.phase in _FINISHED:
                continue
            if _missing_cpu_or_memory(pod):
                req = requests(pod)
                pc, pm = _non_zero_cpu_memory(pod, req)
                nz_cpu[at] += pc - req.get(CPU, 0)
                nz_mem[at] += pm - req.get(MEMORY, 0)
            aff = spec.affinity
            if aff is not None and aff.pod_anti_affinity is not None:
                self._add_existing_anti(pod, at)
        self.free_cpu = [a - u for a, u in zip(self.alloc_cpu, self.req_cpu, strict=True)]
        self.free_mem = [a - u for a, u in zip(self.alloc_mem, self.req_mem, strict=True)]
        self.free_eph = [a - u for a, u in zip(self.alloc_eph, self.req_eph, strict=True)]
        self.free_pods = [a - u for a, u in zip(self.alloc_pods, self.pod_count, strict=True)]
        #: per node, an upper bound of its resource score for any pod (see :meth:`_score`)
        self._bound = [self._least_allocated_bound(i) for i in range(n)]
        #: resource scores per pod request class, per node (None: not known); a bind clears its
        #: node's entries
        self._resource_cache: dict[tuple[int, ...], list[int | None]] = {}
        self._cached_at: list[list[list[int | None]]] = [[] for _ in range(n)]
        #: request classes' lists of fitting nodes, and the classes by their cpu, memory and
        #: ephemeral-storage request (ascending, for :meth:`_drop_unfit`)
        self._fit_classes: dict[tuple[object, ...], _FitClass] = {}
        self._fit_by: tuple[tuple[list[int], list[_FitClass]], ...] = (([], []), ([], []), ([], []))
        self._fit_scalar: list[_FitClass] = []
        self._classes: dict[bytes, _PodClass] = {}

    # ---------------------------------------------------------------- state

    def _add_requests(self, i: int, pod: Pod, req: Mapping[str, int], sign: int = 1) -> None:
        self.req_cpu[i] += sign * req.get(CPU, 0)
        self.req_mem[i] += sign * req.get(MEMORY, 0)
        self.req_eph[i] += sign * req.get(EPHEMERAL_STORAGE, 0)
        for name, amount in req.items():
            if name not in _BASIC_RESOURCES:
                scalar = self.req_scalar[i]
                scalar[name] = scalar.get(name, 0) + sign * amount
        pc, pm = _non_zero_cpu_memory(pod, req)
        self.nz_cpu[i] += sign * pc
        self.nz_mem[i] += sign * pm

    def _existing_anti_terms(self, pod: Pod) -> list[tuple[str, _AntiGroup]]:
        """The pod's required anti-affinity terms as (topology key, group), memoised per set of
        terms (and namespace); terms with an invalid selector are left out (kube-scheduler could
        not have admitted such a pod's terms either)."""
        terms = _required_terms(pod, anti=True)
        if not terms:
            return []
        memo_key = _encode((pod.metadata.namespace, terms))
        hit = self._anti_terms.get(memo_key)
        if hit is not None:
            return hit
        c = self.cluster
        hit = []
        for term in terms:
            try:
                match = k8s_labels.compile_label_selector(term.label_selector, none_matches=False)
            except k8s_labels.SelectorError:
                continue
            namespaces = c.term_namespaces(pod, term)
            key = (tuple(sorted(namespaces)), _encode(term.label_selector), term.topology_key)
            group = self._anti_groups.get(key)
            if group is None:
                group = self._anti_groups[key] = _AntiGroup(
                    term.topology_key, match, c.nodes_by_value(term.topology_key)
                )
                for ns in namespaces:
                    self._anti_by_ns.setdefault(ns, []).append(group)
            hit.append((term.topology_key, group))
        self._anti_terms[memo_key] = hit
        return hit

    def _add_existing_anti(self, pod: Pod, i: int) -> None:
        node_labels = self.cluster.labels[i]
        for key, group in self._existing_anti_terms(pod):
            value = node_labels.get(key)
            if value is not None:
                group.add(value)

    def _least_allocated_bound(self, i: int) -> int:
        """Node ``i``'s weighted LeastAllocated score for a pod requesting nothing: no pod scores
        more (requesting more only lowers the score)."""
        w_fit = self._weights.get("NodeResourcesFit", 0)
        a_cpu = self.alloc_cpu[i]
        a_mem = self.alloc_mem[i]
        u_cpu = self.nz_cpu[i]
        u_mem = self.nz_mem[i]
        if a_cpu > 0 and a_mem > 0:
            s_cpu = (a_cpu - u_cpu) * MAX_NODE_SCORE // a_cpu if u_cpu <= a_cpu else 0
            s_mem = (a_mem - u_mem) * MAX_NODE_SCORE // a_mem if u_mem <= a_mem else 0
            return w_fit * ((s_cpu + s_mem) // 2)
        fit = weight = 0
        for a, u in ((a_cpu, u_cpu), (a_mem, u_mem)):
            if a > 0:
                weight += 1
                fit += (a - u) * MAX_NODE_SCORE // a if u <= a else 0
        return w_fit * (fit // weight if weight else 0)

    def bind(self, pod: Pod) -> None:
        """Bind ``pod`` (``spec.nodeName`` set) on its node: the snapshot and every index follow."""
        i = self.cluster.index.get(pod.spec.node_name)
        if i is None:
            raise ValueError(f"pod {pod.key}: node {pod.spec.node_name!r} is not one of the simulated nodes")
        self.snapshot.add_pod(pod)
        if k8s_pods.occupies_node(pod):
            req = self.snapshot.requests(pod)
            before = (self.free_cpu[i], self.free_mem[i], self.free_eph[i], self.free_pods[i])
            self.pod_count[i] += 1
            self._add_requests(i, pod, req)
            self.free_cpu[i] = self.alloc_cpu[i] - self.req_cpu[i]
            self.free_mem[i] = self.alloc_mem[i] - self.req_mem[i]
            self.free_eph[i] = self.alloc_eph[i] - self.req_eph[i]
            self.free_pods[i] = self.alloc_pods[i] - self.pod_count[i]
            self._drop_unfit(i, before)
            self._bound[i] = self._least_allocated_bound(i)
            for cache in self._cached_at[i]:
                cache[i] = None
            self._cached_at[i] = []
            aff = pod.spec.affinity
            if aff is not None and aff.pod_anti_affinity is not None:
                self._add_existing_anti(pod, i)
        self.cluster.pod_added(pod, i)

    def terminate(self, pod: Pod, terminating: Pod) -> None:
        """``pod`` (bound) is being deleted and is now ``terminating`` (the same pod with a
        deletionTimestamp): it keeps its requests, its place in the pod count and its
        anti-affinity, as kube-scheduler's cache keeps a pod until it is gone; only spread
        constraints stop counting it."""
        i = self.cluster.index.get(pod.spec.node_name)
        self.snapshot.add_pod(terminating)  # replaces ``pod``
        if i is None:
            return
        c = self.cluster
        c.forget_pods()
        c.pod_terminating(pod, i)

    def unbind(self, pod: Pod) -> None:
        """``pod`` (bound, as the snapshot has it) is gone: the snapshot and every index follow.
        The request classes' fit lists are made again on demand (a node with more room may fit
        classes it did not)."""
        c = self.cluster
        i = c.index.get(pod.spec.node_name)
        req = self.snapshot.requests(pod)
        if not self.snapshot.remove_pod(pod):
            return
        if i is None:
            return
        if k8s_pods.occupies_node(pod):
            self.pod_count[i] -= 1
            self._add_requests(i, pod, req, -1)
            self.free_cpu[i] = self.alloc_cpu[i] - self.req_cpu[i]
            self.free_mem[i] = self.alloc_mem[i] - self.req_mem[i]
            self.free_eph[i] = self.alloc_eph[i] - self.req_eph[i]
            self.free_pods[i] = self.alloc_pods[i] - self.pod_count[i]
            self._fit_classes = {}
            self._fit_by = (([], []), ([], []), ([], []))
            self._fit_scalar = []
            self._bound[i] = self._least_allocated_bound(i)
            for cache in self._cached_at[i]:
                cache[i] = None
            self._cached_at[i] = []
            aff = pod.spec.affinity
            if aff is not None and aff.pod_anti_affinity is not None:
                node_labels = c.labels[i]
                for key, group in self._existing_anti_terms(pod):
                    value = node_labels.get(key)
                    if value is not None:
                        group.remove(value)
        c.forget_pods()
        c.pod_changed(pod, i, added=False)

    # ---------------------------------------------------------------- one pod

    def _class_of(self, pod: Pod) -> _PodClass:
        key = _class_key(pod)
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = _PodClass(self.cluster, pod)
        return cls

    def decide(self, pod: Pod) -> Decision:
        """Run kube-scheduler's filters and scores for ``pod`` (not bound yet)."""
        c = self.cluster
        n = c.n
        if n == 0:
            return Decision("", fit_error_message(0, {}))
        try:
            pre = _PreFilter(self, pod)
        except k8s_labels.SelectorError as e:
            return Decision("", fit_error_message(n, {}, prefix=f"invalid selector: {e}"))
        feasible, processed = self._find_feasible(pre)
        self._start = (self._start + processed) % n
        if not feasible:
            return Decision("", fit_error_message(n, self._diagnose(pre)))
        if len(feasible) == 1:
            i = feasible[0]
            return Decision(c.names[i], "", None, 1)
        best, best_score = self._score(pod, pre, feasible)
        return Decision(c.names[best], "", best_score, len(feasible))

    def _find_feasible(self, pre: _PreFilter) -> tuple[list[int], int]:
        """The first feasible nodes (up to numFeasibleNodesToFind) from where the previous search
        stopped, and how many nodes were looked at."""
        n = self.cluster.n
        start = self._search_start = self._start
        fit = self._fitting(pre)
        if not fit:
            return [], n
        size = len(fit)
        at = bisect.bisect_left(fit, start)
        blocked = pre.blockers
        slow = self._slow_failure if pre.dynamic else None
        to_find = self._to_find
        if not blocked and slow is None:
            if size < to_find:
                return fit[at:] + fit[:at], n
            order = fit[at : at + to_find]
            if len(order) < to_find:
                order += fit[: to_find - len(order)]
            return order, (order[-1] - start) % n + 1
        feasible: list[int] = []
        # in chunks of the nodes in search order (the fitting nodes from ``at`` on, then those
        # before it), each check a pass over the chunk: the same nodes as one at a time
        pos = 0
        chunk = to_find + (to_find >> 2) + 16
        while pos < size:
            lo = at + pos
            hi = at + min(pos + chunk, size)
            if hi <= size:
                part = fit[lo:hi]
            elif lo >= size:
                part = fit[lo - size : hi - size]
            else:
                part = fit[lo:] + fit[: hi - size]
            pos += len(part)
            for drop in blocked:
                part = drop(part)
            if slow is not None:
                part = [i for i in part if not slow(pre, i)]
            need = to_find - len(feasible)
            if len(part) >= need:
                feasible.extend(part[:need])
                return feasible, (feasible[-1] - start) % n + 1
            feasible.extend(part)
            chunk *= 2
        return feasible, n

    def _fitting(self, pre: _PreFilter) -> list[int]:
        """The nodes passing the static filters where the pod's requests fit (NodeResourcesFit),
        kept per request class (and kept right by :meth:`_drop_unfit` as pods are bound)."""
        key = pre.cls.fit_key
        classes = self._fit_classes
        fit = classes.get(key)
        if fit is None:
            if len(classes) >= _FIT_CLASSES:
                self._forget_fit_class(classes.pop(next(iter(classes))))
            cpu = pre.cpu if pre.cpu > 0 else _NO_REQUEST
            mem = pre.mem if pre.mem > 0 else _NO_REQUEST
            eph = pre.eph if pre.eph > 0 else _NO_REQUEST
            free_cpu, free_mem, free_eph, free_pods = (
                self.free_cpu,
                self.free_mem,
                self.free_eph,
                self.free_pods,
            )
            nodes = [
                i
                for i in pre.passing
                if free_pods[i] > 0 and cpu <= free_cpu[i] and mem <= free_mem[i] and eph <= free_eph[i]
            ]
            if pre.scalar:
                nodes = [i for i in nodes if not self._scalar_failures(pre, i)]
            fit = classes[key] = _FitClass(nodes, (cpu, mem, eph), pre.scalar)
            for amount, (amounts, members) in zip(fit.requests, self._fit_by, strict=True):
                at = bisect.bisect_right(amounts, amount)
                amounts.insert(at, amount)
                members.insert(at, fit)
            if pre.scalar:
                self._fit_scalar.append(fit)
        return fit.nodes

    def _forget_fit_class(self, fit: _FitClass) -> None:
        for amount, (amounts, members) in zip(fit.requests, self._fit_by, strict=True):
            at = bisect.bisect_left(amounts, amount)
            while members[at] is not fit:
                at += 1
            del amounts[at]
            del members[at]
        if fit in self._fit_scalar:
            self._fit_scalar.remove(fit)

    def _drop_unfit(self, i: int, before: tuple[int, int, int, int]) -> None:
        """Node ``i`` has less room than ``before`` (its free cpu, memory, ephemeral storage and
        pods): take it off the fit lists of the request classes that no longer fit there. Those
        are the classes requesting more than the node has left of some resource, but no more
        than it had (the others did not have the node, or still fit)."""
        if self.free_pods[i] <= 0 < before[3]:
            affected: Iterable[_FitClass] = self._fit_classes.values()
        else:
            gone: list[_FitClass] = []
            for (amounts, members), old, new in zip(
                self._fit_by, before[:3], (self.free_cpu[i], self.free_mem[i], self.free_eph[i]), strict=True
            ):
                if new < old:
                    gone.extend(
                        members[bisect.bisect_right(amounts, new) : bisect.bisect_right(amounts, old)]
                    )
            gone.extend(fit for fit in self._fit_scalar if self._short_of(fit.scalar, i))
            affected = gone
        for fit in affected:
            nodes = fit.nodes
            at = bisect.bisect_left(nodes, i)
            if at < len(nodes) and nodes[at] == i:
                del nodes[at]

    def _diagnose(self, pre: _PreFilter) -> Counter[str]:
        """Every node's reasons, as kube-scheduler's FitError counts them."""
        reasons: Counter[str] = Counter()
        static = pre.static
        for i in range(self.cluster.n):
            if static[i]:
                reasons[static[i]] += 1
                continue
            found: list[str] = []
            if not self._resource_failure(pre, i, found):
                self._dynamic_failure(pre, i, found)
            for r in found:
                reasons[r] += 1
        return reasons

    def _resource_failure(self, pre: _PreFilter, i: int, reasons: list[str]) -> bool:
        failed: list[str] = []
        if self.free_pods[i] <= 0:
            failed.append(R_TOO_MANY_PODS)
        if pre.cpu > 0 and pre.cpu > self.free_cpu[i]:
            failed.append("Insufficient cpu")
        if pre.mem > 0 and pre.mem > self.free_mem[i]:
            failed.append("Insufficient memory")
        if pre.eph > 0 and pre.eph > self.free_eph[i]:
            failed.append("Insufficient ephemeral-storage")
        failed.extend(self._scalar_failures(pre, i))
        reasons.extend(failed)
        return bool(failed)

    def _scalar_failures(self, pre: _PreFilter, i: int) -> list[str]:
        if not pre.scalar:
            return []
        alloc = self.alloc[i]
        used = self.req_scalar[i]
        return [
            f"Insufficient {name}"
            for name, amount in pre.scalar
            if amount > alloc.get(name, 0) - used.get(name, 0)
        ]

    def _short_of(self, scalar: list[tuple[str, int]], i: int) -> bool:
        """Whether node ``i`` lacks room for one of these extended-resource requests."""
        alloc = self.alloc[i]
        used = self.req_scalar[i]
        return any(amount > alloc.get(name, 0) - used.get(name, 0) for name, amount in scalar)

    def _slow_failure(self, pre: _PreFilter, i: int) -> bool:
        """The check the search does not take from ``pre.blockers``: required pod affinity."""
        return not self._affinity_ok(pre, self.cluster.labels[i])

    def _affinity_ok(self, pre: _PreFilter, labels: Mapping[str, str]) -> bool:
        exist = True
        counts = pre.affinity_counts
        for key in pre.affinity_keys:
            value = labels.get(key)
            if value is None:
                return False  # every topology key must be on the node
            if counts.get((key, value), 0) <= 0:
                exist = False
        # the first pod of a group that is affine to itself may go anywhere
        return exist or (not counts and pre.self_affine)

    def _dynamic_failure(self, pre: _PreFilter, i: int, reasons: list[str]) -> bool:
        """PodTopologySpread and InterPodAffinity on node ``i``, in kube-scheduler's order;
        appends the failing plugin's reason to ``reasons``."""
        labels = self.cluster.labels[i]
        # PodTopologySpread
        for con, _ in pre.hard:
            if con.key not in labels:
                reasons.append(R_SPREAD_LABEL)
                return True
        for con, limit in pre.hard:
            if con.counter.counts.get(labels[con.key], 0) > limit:
                reasons.append(R_SPREAD)
                return True
        # InterPodAffinity
        existing_anti, own_anti = pre.anti_domains()
        for key, values in existing_anti.items():
            value = labels.get(key)
            if value is not None and value in values:
                reasons.append(R_EXISTING_ANTI)
                return True
        if pre.affinity_keys and not self._affinity_ok(pre, labels):
            reasons.append(R_AFFINITY)
            return True
        for key, values in own_anti.items():
            value = labels.get(key)
            if value is not None and value in values:
                reasons.append(R_ANTI_AFFINITY)
                return True
        return False

    # ---------------------------------------------------------------- scores

    def _score(self, pod: Pod, pre: _PreFilter, feasible: list[int]) -> tuple[int, int]:
        """The feasible node with the highest weighted sum of the score plugins' normalised
        scores (ties: the first name), and that sum.

        The resource score is computed only for the nodes that can still win: a node's resource
        score is at most its LeastAllocated score for an empty request (``self._bound``) plus
        the full BalancedAllocation score, and a node whose bound falls short of the exact total
        of the node with the best bound can neither win nor tie.
        """
        keys, table, exceptions = self._other_scores(pre, feasible)
        if self._generic is not None:
            wg = self._weights[GENERIC_PLUGIN]
            others = list(map(table.__getitem__, keys)) if keys is not None else [table[()]] * len(feasible)
            for j, x in exceptions.items():
                others[j] = x
            totals = [wg * s + x for s, x in zip(self._generic_scores(pod, feasible), others, strict=True)]
            return _best(feasible, totals)
        w = self._weights
        w_fit = w["NodeResourcesFit"]
        w_bal = w["NodeResourcesBalancedAllocation"] if not pre.best_effort else 0
        bound_of = self._bound.__getitem__
        if keys is None:
            constant = table[()]
            bounds = list(map(bound_of, feasible))
        else:
            constant = 0
            bounds = list(map(add, map(table.__getitem__, keys), map(bound_of, feasible)))
            for j, x in exceptions.items():
                bounds[j] += x - table[keys[j]]
        caches = self._resource_cache
        cache_key = (pre.nz_cpu, pre.nz_mem, pre.cpu, pre.mem, w_bal)
        cache = caches.get(cache_key)
        if cache is None:
            if len(caches) >= _RESOURCE_CACHE_CLASSES:
                del caches[next(iter(caches))]
            cache = caches[cache_key] = [None] * self.cluster.n
        # the node with the best bound: its exact total is a floor for the winner's
        j0 = bounds.index(max(bounds))
        i0 = feasible[j0]
        score = cache[i0]
        if score is None:
            (score,) = self._resource_scores(pre, [i0], w_fit, w_bal, cache)
        if pre.nz_cpu >= 0 and pre.nz_mem >= 0 and w_fit >= 0 and w_bal >= 0:
            threshold = bounds[j0] - self._bound[i0] + score - w_bal * MAX_NODE_SCORE
            at = list(compress(range(len(feasible)), map(threshold.__le__, bounds)))
        else:
            at = list(range(len(feasible)))
        nodes = list(map(feasible.__getitem__, at))
        scores = list(map(cache.__getitem__, nodes))
        if None in scores:
            missing = list(compress(range(len(scores)), map(is_, scores, repeat(None))))
            computed = self._resource_scores(pre, list(map(nodes.__getitem__, missing)), w_fit, w_bal, cache)
            for k, score in zip(missing, computed, strict=True):
                scores[k] = score
        # a candidate's other scores: what its bound holds beyond its resource bound
        beyond = map(sub, map(bounds.__getitem__, at), map(bound_of, nodes))
        best, total = _best(nodes, list(map(add, beyond, scores)), at)
        return best, total + constant

    def _resource_scores(
        self, pre: _PreFilter, nodes: list[int], w_fit: int, w_balanced: int, cache: list[int | None]
    ) -> list[int]:
        """NodeResourcesFit (LeastAllocated over NonZeroRequested, cpu and memory weight 1) and
        NodeResourcesBalancedAllocation (requested fractions of cpu and memory; weight 0 for a
        best-effort pod, which it skips), weighted and summed, for the pod on each of ``nodes``;
        kept in ``cache`` (the pod's request class's) until the node is bound to."""
        alloc_cpu, alloc_mem, nz_cpu, nz_mem = self.alloc_cpu, self.alloc_mem, self.nz_cpu, self.nz_mem
        req_cpu, req_mem, cached_at = self.req_cpu, self.req_mem, self._cached_at
        p_nz_cpu, p_nz_mem, p_cpu, p_mem = pre.nz_cpu, pre.nz_mem, pre.cpu, pre.mem
        out: list[int] = []
        for i in nodes:
            a_cpu = alloc_cpu[i]
            a_mem = alloc_mem[i]
            if a_cpu > 0 and a_mem > 0:
                used = nz_cpu[i] + p_nz_cpu
                s_cpu = (a_cpu - used) * 100 // a_cpu if used <= a_cpu else 0
                used = nz_mem[i] + p_nz_mem
                s_mem = (a_mem - used) * 100 // a_mem if used <= a_mem else 0
                score = w_fit * ((s_cpu + s_mem) // 2)
                if w_balanced:
                    score += w_balanced * balanced_allocation_score(
                        req_cpu[i] + p_cpu, req_mem[i] + p_mem, req_cpu[i], req_mem[i], a_cpu, a_mem
                    )
            else:
                # a node without cpu or memory allocatable: that resource is left out
                fit = weight = 0
                for a, u in ((a_cpu, nz_cpu[i] + p_nz_cpu), (a_mem, nz_mem[i] + p_nz_mem)):
                    if a > 0:
                        weight += 1
                        fit += (a - u) * MAX_NODE_SCORE // a if u <= a else 0
                score = w_fit * (fit // weight if weight else 0)
                if w_balanced:
                    # one fraction (or none): standard deviation 0 with and without the pod
                    score += w_balanced * _balanced_change(MAX_NODE_SCORE, MAX_NODE_SCORE)
            out.append(score)
            cache[i] = score
            cached_at[i].append(cache)
        return out

    def _generic_scores(self, pod: Pod, feasible: list[int]) -> list[int]:
        assert self._generic is not None
        allocatable = []
        allocated = []
        for i in feasible:
            allocatable.append(self.alloc[i])
            allocated.append(
                {
                    **self.req_scalar[i],
                    CPU: self.nz_cpu[i],
                    MEMORY: self.nz_mem[i],
                    EPHEMERAL_STORAGE: self.req_eph[i],
                    PODS: self.pod_count[i],
                }
            )
        scores = self._generic.node_scores(requesting_of(pod), allocatable, allocated)
        return [int(s) for s in scores]

    def _other_scores(
        self, pre: _PreFilter, feasible: list[int]
    ) -> tuple[Sequence[Any] | None, Mapping[Any, int], dict[int, int]]:
        """TaintToleration, NodeAffinity, InterPodAffinity and PodTopologySpread, weighted and
        summed, per feasible node: ``table[keys[j]]`` for the ``j``-th node, unless
        ``exceptions`` has it (``keys`` None: ``table[()]`` for every node).

        A node's key is its signature (see :class:`_ScorePlan`), with its counts of matching
        pods in its hostname-like domains when many nodes have some; when few do, those nodes
        are found by bisection (``feasible`` is two ascending runs: the nodes from the search's
        start on, then those before it) and are the exceptions."""
        plan = pre.cls.score_plan(self)
        n_feasible = len(feasible)
        maps = plan.maps()
        if plan.constant:
            (row,) = plan.rows
            totals = plan.evaluate([(row, ())], [True], n_feasible, n_feasible if plan.ignored(row) else 0)
            return None, {(): totals[0]}, {}
        sig = plan.sig
        keys: list[int] = list(map(sig.__getitem__, feasible))
        rows = plan.rows
        if maps and sum(map(len, maps)) * 4 > n_feasible:
            # many nodes with matching pods: a count per map in every key
            columns = [keys, *(list(map(m.get, feasible, repeat(0))) for m in maps)]
            rows_of: list[tuple[int, ...]] = list(zip(*columns, strict=True))
            distinct = list(set(rows_of))
            entries = [(rows[k[0]], k[1:]) for k in distinct]
            ignored = [plan.ignored(row) for row, _ in entries]
            n_ignored = 0
            if any(ignored):
                counts = Counter(rows_of)
                n_ignored = sum(counts[k] for k, ign in zip(distinct, ignored, strict=True) if ign)
            totals = plan.evaluate(entries, [True] * len(entries), n_feasible, n_ignored)
            return rows_of, dict(zip(distinct, totals, strict=True)), {}
        sigs = list(set(keys))
        zeros = (0,) * len(maps)
        entries = [(rows[s], zeros) for s in sigs]
        occurring = [True] * len(sigs)
        extra: dict[int, list[int]] = {}
        by_entry: dict[tuple[int, tuple[int, ...]], int] = {}
        if maps:
            start = self._search_start
            split = bisect.bisect_left(feasible, True, key=start.__gt__)
            # the last node of each run (-1: the run is empty)
            last_from = feasible[split - 1] if split else -1
            last_before = feasible[-1] if split < n_feasible else -1
            for e, m in enumerate(maps):
                for i, count in m.items():
                    if i >= start:
                        if i > last_from:
                            continue
                        j = bisect.bisect_left(feasible, i, 0, split)
                    else:
                        if i > last_before:
                            continue
                        j = bisect.bisect_left(feasible, i, split, n_feasible)
                    if feasible[j] == i:
                        extra.setdefault(j, [0] * len(maps))[e] = count
            if extra:
                # a signature's row without counts occurs unless all its nodes are exceptions
                per_sig = Counter(keys[j] for j in extra)
                occurring = [s not in per_sig or keys.count(s) > per_sig[s] for s in sigs]
                for j, counts_j in extra.items():
                    entry_key = (keys[j], tuple(counts_j))
                    if entry_key not in by_entry:
                        by_entry[entry_key] = len(entries)
                        entries.append((rows[keys[j]], entry_key[1]))
                        occurring.append(True)
        n_ignored = 0
        if plan.may_ignore:
            n_ignored = sum(keys.count(s) for s in sigs if plan.ignored(rows[s]))
        totals = plan.evaluate(entries, occurring, n_feasible, n_ignored)
        exceptions = {j: totals[by_entry[(keys[j], tuple(c))]] for j, c in extra.items()}
        # (the entries after the signatures' are the exceptions')
        return keys, dict(zip(sigs, totals, strict=False)), exceptions


def _balance(f_cpu: float, f_mem: float) -> int:
    """kube-scheduler's ``balancedResourceScore`` for two requested fractions: (1 - std) * 100,
    the fractions capped at 1, std = |f1 - f2| / 2, truncated as Go's int64() truncates."""
    diff = (f_cpu if f_cpu < 1.0 else 1.0) - (f_mem if f_mem < 1.0 else 1.0)
    return int((1 - abs(diff / 2)) * MAX_NODE_SCORE)


def _balanced_change(with_pod: int, without_pod: int) -> int:
    """kube-scheduler 1.36's ``balancedResourceScorer``: the change in balance the pod causes,
    brought back into [50, 100] (75: no change; 100: the pod makes the node as balanced as it
    can be; 50: the other way round)."""
    return MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + with_pod - without_pod) // 2


def balanced_allocation_score(
    cpu_with: int, mem_with: int, cpu_without: int, mem_without: int, alloc_cpu: int, alloc_mem: int
) -> int:
    """NodeResourcesBalancedAllocation as kube-scheduler 1.36 scores a node (kubernetes#135573):
    ``50 + (50 + balance(with the pod) - balance(without it)) / 2`` over the raw (not non-zero)
    cpu and memory requests; a resource the node has no allocatable of is left out (one fraction
    or none: balance 100). Best-effort pods are not scored at all (the caller skips them)."""
    if alloc_cpu > 0 and alloc_mem > 0:
        return _balanced_change(
            _balance(cpu_with / alloc_cpu, mem_with / alloc_mem),
            _balance(cpu_without / alloc_cpu, mem_without / alloc_mem),
        )
    return _balanced_change(MAX_NODE_SCORE, MAX_NODE_SCORE)


def _heap_order_key(position: int) -> str:
    """Where a position of kube-scheduler's score list sits in a pre-order walk of the binary
    heap laid over that list (root, left subtree, right subtree): the path from the root, ``0``
    left and ``1`` right; a prefix (an ancestor) sorts before its descendants."""
    return bin(position + 1)[3:]


def heap_winner(totals: Sequence[int]) -> int:
    """The position kube-scheduler 1.36 picks among its feasible nodes' ``totals`` (in the order
    of its feasible list), without extenders.

    ``schedulePod`` builds a ``container/heap`` over the scores (``heap.Init``; the order:
    higher total first, then a higher ``Randomizer``, which only extenders set, so it is 0 for
    every node) and pops its root. ``heap.Init`` sifts each inner position down, from the last
    one to the root, swapping a parent with its larger child only when the child is strictly
    greater (the left child on a tie). So the root of every subtree is its own root when that
    holds the subtree's maximum, else the root of the left subtree when the left one holds the
    maximum, else of the right one: the winner is the first node with the highest total in a
    pre-order walk of the heap (positions 0, 1, 3, 7, ..., 4, 9, 10, 2, 5, ...), not the
    first one in the list (the two differ only from four nodes on).
    """
    top = max(totals)
    at = [j for j, t in enumerate(totals) if t == top]
    return at[0] if len(at) == 1 else min(at, key=_heap_order_key)


def _best(feasible: list[int], totals: list[int], positions: Sequence[int] | None = None) -> tuple[int, int]:
    """The node kube-scheduler picks (the highest total; ties: :func:`heap_winner`) and its
    total. ``positions``: each candidate's position in the feasible list (default: its index)."""
    top = max(totals)
    if totals.count(top) == 1:
        return feasible[totals.index(top)], top
    tied = [j for j, t in enumerate(totals) if t == top]
    if positions is None:
        return feasible[min(tied, key=_heap_order_key)], top
    return feasible[min(tied, key=lambda j: _heap_order_key(positions[j]))], top


def _default_normalize(scores: Sequence[int], *, reverse: bool, top: int) -> list[int]:
    """kube-scheduler's ``helper.DefaultNormalizeScore`` (``top``: the highest of the feasible
    nodes' scores)."""
    if top == 0:
        return [MAX_NODE_SCORE if reverse else 0] * len(scores)
    if reverse:
        return [MAX_NODE_SCORE - MAX_NODE_SCORE * s // top for s in scores]
    return [MAX_NODE_SCORE * s // top for s in scores]


class _ScorePlan:
    """How a pod class's TaintToleration, NodeAffinity, InterPodAffinity and PodTopologySpread
    scores of a node follow from a few things about the node.

    ``sig[i]`` is node ``i``'s *signature*, an index into ``rows``: its untolerated
    PreferNoSchedule taints, the weight of its matching preferred node-affinity terms and its
    values of the topology keys the scores read by value (None where it lacks one), as a tuple.
    The counts of matching pods in hostname-like domains are kept per node instead (``maps``:
    node -> count, live). The scores of a node are then a function of its row and its counts:
    :meth:`evaluate`, with kube-scheduler's normalisation over the feasible nodes.
    """

    def __init__(self, c: _Cluster, cls: _PodClass, weights: Mapping[str, int]) -> None:
        self.cluster = c
        self.weights = weights
        self.soft_defaulted = cls.soft_defaulted
        components: list[Sequence[object]] = []
        shape: list[object] = []
        #: where the row holds the taint count and the preferred weight (-1: not scored)
        self.taint_at = self.affinity_at = -1
        if c.prefer_no_schedule:
            self.taint_at = len(components)
            components.append(cls.prefer_no_schedule(c))
            shape.append(("taints", _encode(cls.pod.spec.tolerations)))
        if k8s_affinity.has_preferred_node_affinity(cls.pod):
            self.affinity_at = len(components)
            components.append(cls.preferred_node_affinity(c))
            aff = cls.pod.spec.affinity
            assert aff is not None and aff.node_affinity is not None
            shape.append(
                ("affinity", _encode(aff.node_affinity.preferred_during_scheduling_ignored_during_execution))
            )
        self._maps: list[Callable[[], dict[int, int]]] = []
        value_keys: dict[str, int] = {}

        def value_column(key: str) -> int:
            at = value_keys.get(key)
            if at is None:
                at = value_keys[key] = len(components)
                components.append(c.values_of(key))
                shape.append(("key", key))
            return at

        #: InterPodAffinity: (weight, in the row (else in the counts), where, domain counts)
        self.inter: list[tuple[int, bool, int, Mapping[str, int]]] = []
        for ti, key, weight in cls.preferred:
            if c.fine(key):
                self.inter.append((weight, False, len(self._maps), {}))
                self._maps.append(partial(ti.by_node_of, key, c.labels, c.nodes_by_value(key)))
            else:
                self.inter.append((weight, True, value_column(key), ti.domain_counts(key, c.labels)))
        #: PodTopologySpread: (constraint, by value in the row (else in the counts), where)
        self.spread: list[tuple[_Constraint, bool, int]] = []
        for con in cls.soft:
            key = con.key
            if key == _LABEL_HOSTNAME and c.all_have(key) and c.fine(key):
                self.spread.append((con, False, len(self._maps)))
                self._maps.append(partial(con.counter.by_node, c.nodes_by_value(key)))
            else:
                self.spread.append((con, True, value_column(key)))
        self.sig, self.rows = c.signatures(tuple(shape), components)
        #: whether the scores are the same on every node, whatever the pods bound later
        self.constant = len(self.rows) == 1 and not self._maps
        self._by_value = [at for _, by_value, at in self.spread if by_value]
        #: whether a node can be left out of PodTopologySpread's score (it lacks a key)
        self.may_ignore = not self.soft_defaulted and bool(self._by_value)

    def maps(self) -> list[dict[int, int]]:
        return [m() for m in self._maps]

    def ignored(self, row: tuple[object, ...]) -> bool:
        """Whether PodTopologySpread leaves a node with this row out (it lacks a key)."""
        return self.may_ignore and any(row[at] is None for at in self._by_value)

    def evaluate(
        self,
        entries: list[tuple[tuple[object, ...], tuple[int, ...]]],
        occurring: list[bool],
        n_feasible: int,
        n_ignored: int,
    ) -> list[int]:
        """The weighted sum of the scores for each (row, counts) entry; the normalisation runs
        over the ``occurring`` entries (those of the feasible nodes), ``n_ignored`` of the
        ``n_feasible`` nodes lacking a key PodTopologySpread needs."""
        w = self.weights
        totals = [0] * len(entries)
        if self.taint_at < 0:
            totals = [t + w["TaintToleration"] * MAX_NODE_SCORE for t in totals]
        else:
            at = self.taint_at
            raw: list[int] = [row[at] for row, _ in entries]  # type: ignore[misc]
            scores = _default_normalize(raw, reverse=True, top=max(compress(raw, occurring)))
            totals = [t + w["TaintToleration"] * s for t, s in zip(totals, scores, strict=True)]
        if self.affinity_at >= 0:
            at = self.affinity_at
            raw = [row[at] for row, _ in entries]  # type: ignore[misc]
            scores = _default_normalize(raw, reverse=False, top=max(compress(raw, occurring)))
            totals = [t + w["NodeAffinity"] * s for t, s in zip(totals, scores, strict=True)]
        if self.inter:
            raw_inter = [0] * len(entries)
            for weight, by_value, at, domains in self.inter:
                if by_value:
                    raw_inter = [
                        r + weight * domains.get(row[at], 0)  # type: ignore[call-overload]
                        for r, (row, _) in zip(raw_inter, entries, strict=True)
                    ]
                else:
                    raw_inter = [
                        r + weight * counts[at] for r, (_, counts) in zip(raw_inter, entries, strict=True)
                    ]
            present = list(compress(raw_inter, occurring))
            lo, hi = min(present), max(present)
            if hi != lo:
                w_inter = w["InterPodAffinity"]
                totals = [
                    t + w_inter * int(MAX_NODE_SCORE * ((s - lo) / (hi - lo)))
                    for t, s in zip(totals, raw_inter, strict=True)
                ]
        if self.spread:
            scores = self._spread_scores(entries, occurring, n_feasible, n_ignored)
            totals = [t + w["PodTopologySpread"] * s for t, s in zip(totals, scores, strict=True)]
        return totals

    def _spread_scores(
        self,
        entries: list[tuple[tuple[object, ...], tuple[int, ...]]],
        occurring: list[bool],
        n_feasible: int,
        n_ignored: int,
    ) -> list[int]:
        """PodTopologySpread's score: per constraint, the matching pods in the node's domain times
        log(domains + 2), plus maxSkew - 1; fewer is better after normalising. Nodes without
        every topology key score 0 (unless the constraints are the system defaults)."""
        ignored = [self.ignored(row) for row, _ in entries]
        weights: list[float] = []
        for con, by_value, at in self.spread:
            if con.key == _LABEL_HOSTNAME:
                size = n_feasible - n_ignored
            else:
                assert by_value
                values = {
                    row[at]
                    for (row, _), ign, occ in zip(entries, ignored, occurring, strict=True)
                    if occ and not ign
                }
                values.discard(None)
                size = len(values)
            weights.append(math.log(size + 2))
        scores: list[int] = []
        for (row, counts), ign in zip(entries, ignored, strict=True):
            r = 0.0
            for (con, by_value, at), weight in zip(self.spread, weights, strict=True):
                if by_value:
                    v = row[at]
                    if v is None:
                        continue
                    count = con.counter.counts.get(v, 0)  # type: ignore[call-overload]
                else:
                    count = counts[at]
                r = r + count * weight + (con.max_skew - 1)
            scores.append(-1 if ign else math.floor(r + 0.5))
        valid = [v for v, occ in zip(scores, occurring, strict=True) if occ and v >= 0]
        lo = min(valid) if valid else 0
        hi = max(valid) if valid else 0
        if hi == 0:
            return [0 if v < 0 else MAX_NODE_SCORE for v in scores]
        return [0 if v < 0 else MAX_NODE_SCORE * (hi + lo - v) // hi for v in scores]


class _PreFilter:
    """What the PreFilter and PreScore extension points compute once per pod: its class
    (memoised) and what depends on the pods bound so far. Raises SelectorError for a pod with
    an invalid selector."""

    def __init__(self, sim: PlacementSimulator, pod: Pod) -> None:
        cls = sim._class_of(pod)
        if cls.error is not None:
            raise cls.error
        c = sim.cluster
        self.cls = cls
        self.static = cls.static
        self.passing = cls.passing
        self.cpu = cls.cpu
        self.mem = cls.mem
        self.eph = cls.eph
        self.scalar = cls.scalar
        self.nz_cpu = cls.nz_cpu
        self.nz_mem = cls.nz_mem
        self.best_effort = cls.best_effort
        # PodTopologySpread: a node fails a hard constraint when its domain's count exceeds
        # maxSkew + global minimum - (1 if the pod matches its own selector)
        self.hard = [
            (con, con.max_skew + con.counter.global_min(con.min_domains) - con.self_match) for con in cls.hard
        ]
        self.soft = cls.soft
        self.soft_defaulted = cls.soft_defaulted
        # InterPodAffinity: the existing pods' anti-affinity terms that match this pod (those
        # held by some pod)
        self.anti_groups = [g for g in cls.existing_anti_groups(sim._anti_by_ns) if g.values]
        node_labels = c.labels
        # the pod's own required affinity: pods matching all its terms, per topology pair
        terms = cls.affinity_terms
        self.affinity_keys = cls.affinity_keys
        self.affinity_counts: dict[tuple[str, str], int] = {}
        self.self_affine = cls.self_affine
        if terms:
            indexes = cls.affinity_indexes
            for i, pods in indexes[0].by_node.items():
                for q in pods:
                    if all(ti.matches(q) for ti in indexes[1:]):
                        for t in terms:
                            value = node_labels[i].get(t.topology_key)
                            if value is not None:
                                pair = (t.topology_key, value)
                                self.affinity_counts[pair] = self.affinity_counts.get(pair, 0) + 1
        # what the search checks per node: the domains where the pod would break a hard spread
        # constraint, an existing pod's anti-affinity or its own, each a filter over a chunk of
        # nodes; nodes without a hard constraint's topology key are left out of the search
        # beforehand
        self.blockers: list[Callable[[list[int]], list[int]]] = []
        for con, limit in self.hard:
            hist = con.counter.hist
            if hist and max(hist) > limit:
                self.blockers.append(_over_limit(c, con, limit))
        for group in self.anti_groups:
            self.blockers.append(partial(_without, group.nodes))
        for ti, key in cls.own_anti:
            nodes = ti.nodes_in_domains(key, node_labels, c.nodes_by_value(key))
            if nodes:
                self.blockers.append(partial(_without, nodes))
        self.dynamic = bool(self.affinity_keys)
        self._cluster = c

    def anti_domains(self) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
        """The domains where existing pods' anti-affinity, and the pod's own, rule it out: per
        topology key, the values."""
        existing: dict[str, set[str]] = {}
        for group in self.anti_groups:
            existing.setdefault(group.key, set()).update(group.values)
        own: dict[str, set[str]] = {}
        for ti, key in self.cls.own_anti:
            domains = ti.domain_counts(key, self._cluster.labels)
            if domains:
                own.setdefault(key, set()).update(domains)
        return existing, own


def _without(nodes: set[int], part: list[int]) -> list[int]:
    return list(filterfalse(nodes.__contains__, part))


def _over_limit(c: _Cluster, con: _Constraint, limit: int) -> Callable[[list[int]], list[int]]:
    """A filter dropping the nodes whose domain holds more than ``limit`` matching pods (every
    node searched carries the key)."""
    counter = con.counter
    if c.fine(con.key):
        node_map = counter.by_node(c.nodes_by_value(con.key))
        if len(node_map) <= 4 * _SMALL_SET:
            over = {j for j, count in node_map.items() if count > limit}
            return partial(_without, over)
        within = limit.__ge__
        get = node_map.get
        return lambda part: list(compress(part, map(within, map(get, part, repeat(0)))))
    ok = {value for value in c.nodes_by_value(con.key) if counter.counts.get(value, 0) <= limit}
    values = c.values_of(con.key).__getitem__
    return lambda part: list(compress(part, map(ok.__contains__, map(values, part))))


# =============================================================================== the before/after picture


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """A node's requests as a percentage of its allocatable."""

    name: str
    cpu: float
    memory: float
    pods: float


@dataclass(frozen=True, slots=True)
class Stats:
    mean: float
    stddev: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Stats:
        if not values:
            return cls(0.0, 0.0, 0.0, 0.0)
        mean = sum(values) / len(values)
        var = sum((v - mean) ** 2 for v in values) / len(values)
        return cls(mean, math.sqrt(var), min(values), max(values))


@dataclass(frozen=True, slots=True)
class ConstraintSkew:
    """One distinct topology spread constraint and how skewed its domains are."""

    #: Identifies the constraint across pictures.
    id: str
    namespace: str
    topology_key: str
    max_skew: int
    when_unsatisfiable: str
    selector: str
    min_domains: int | None
    #: The declaring workload (owner kind/name) or pod.
    declared_by: str
    domains: int
    pods: int
    skew: int
    #: Pods above ``global minimum + maxSkew`` in their domain.
    excess: int


@dataclass(frozen=True, slots=True)
class _SpreadSpec:
    pod: Pod
    constraint: TopologySpreadConstraint
    required_keys: tuple[str, ...]


VIOLATION_KINDS: Final = ("taints", "nodeAffinity", "podAntiAffinity", "topologySpread")


@dataclass
class ClusterPicture:
    """Node utilisation, topology skew and remaining violations at one moment."""

    nodes: list[NodeUsage]
    skew: list[ConstraintSkew]
    #: Pods violating, by kind (see :data:`VIOLATION_KINDS`); topologySpread counts the pods in
    #: excess of their DoNotSchedule constraints.
    violations: dict[str, int]
    specs: dict[str, _SpreadSpec] = field(default_factory=dict, repr=False)
    #: What a later picture of the same snapshot can start from (see :func:`cluster_picture`).
    state: _Picture | None = field(default=None, repr=False, compare=False)

    def stats(self, resource: str) -> Stats:
        return Stats.of([getattr(u, resource) for u in self.nodes])


def _spec_id(pod: Pod, c: TopologySpreadConstraint) -> str:
    labels = pod.metadata.labels or {}
    extra = tuple((k, labels[k]) for k in c.match_label_keys or () if k in labels)
    aff = _affinity_shape(pod) if (c.node_affinity_policy or _HONOR) == _HONOR else b""
    taints = _encode(pod.spec.tolerations) if c.node_taints_policy == _HONOR else b""
    raw = _encode((pod.metadata.namespace, c, extra, aff, taints))
    return hashlib.sha1(raw).hexdigest()[:12]


def _declared_by(pod: Pod) -> str:
    ref = k8s_pods.controller_ref(pod)
    return f"{ref.kind}/{ref.name}" if ref is not None else f"Pod/{pod.metadata.name}"


def cluster_picture(
    snapshot: ClusterSnapshot,
    extra_specs: Mapping[str, _SpreadSpec] | None = None,
    *,
    since: ClusterPicture | None = None,
) -> ClusterPicture:
    """Utilisation per node, the skew of every topology spread constraint the pods declare (and
    of ``extra_specs``, e.g. those of an earlier picture), and the pods still violating taints,
    node affinity, required anti-affinity and DoNotSchedule spread constraints.

    ``since``, an earlier picture of the same snapshot, is brought up to date from the pods
    that came and went since (it can be used once: its state moves to the new picture)."""
    state = since.state if since is not None else None
    if state is not None and state.snapshot is snapshot:
        since.state = None  # type: ignore[union-attr]
        if state.catch_up():
            return state.picture(extra_specs)
    state = _Picture(snapshot)
    return state.picture(extra_specs)


class _Picture:
    """What a picture counts, kept so that a later picture of the same snapshot only has to
    count the pods that came and went: the pods in snapshot order, the violations of taints and
    node affinity so far, the pods with required anti-affinity, the pods declaring each spread
    constraint (in order: the first one stands for it), and the spread counters and term
    indexes of :class:`_Cluster`."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.c = c = _Cluster(snapshot)
        self.alloc = [snapshot.allocatable(node) for node in c.nodes]
        self.tainted = [any(t.effect in _SCHED_EFFECTS for t in node.spec.taints or ()) for node in c.nodes]
        self.n_taints = 0
        self.n_affinity = 0
        #: pods with required anti-affinity: id -> (pod, node, its terms' indexes)
        self.anti: dict[int, tuple[Pod, int, list[tuple[str, _TermIndex]]]] = {}
        #: spread constraint id -> the pods declaring it, in snapshot order (pod, position of
        #: the constraint, the topology keys of the pod's constraints of the same kind)
        self.declared: dict[str, list[tuple[Pod, int, tuple[str, ...]]]] = {}
        # memos by what the checks read of a pod: node affinity per node, the anti-affinity
        # terms' indexes, the spread constraints' ids
        self._affinity: dict[tuple[bytes, int], bool] = {}
        self._anti_terms: dict[bytes, list[tuple[str, _TermIndex]]] = {}
        self._spread_ids: dict[bytes, list[tuple[str, int, tuple[str, ...]]]] = {}
        self.pods = snapshot.pods
        for pod in self.pods:
            self._visit(pod, True)

    def catch_up(self) -> bool:
        """Count the pods that came and went since; False if the snapshot's order does not
        allow it (a pod that stayed moved): then only a fresh picture will do."""
        before = self.pods
        after = self.snapshot.pods
        now = set(map(id, after))
        stayed = list(map(now.__contains__, map(id, before)))
        kept = list(compress(before, stayed))
        came = after[len(kept) :]
        if (
            len(after) < len(kept)
            or not all(map(is_, after, kept))
            or not set(map(id, before)).isdisjoint(map(id, came))
        ):
            return False
        c = self.c
        c.forget_pods()
        index_get = c.index.get
        went = list(compress(before, map(not_, stayed)))
        # the counters and term indexes first: those the visits make are made from the snapshot
        # as it is now
        for pods, added in ((went, False), (came, True)):
            for pod in pods:
                i = index_get(pod.spec.node_name)
                if i is not None:
                    c.pod_changed(pod, i, added)
        for pod in went:
            self._visit(pod, False)
        for pod in came:
            self._visit(pod, True)
        self.pods = after
        return True

    def _visit(self, pod: Pod, added: bool) -> None:
        """Count (or, not ``added``, take back) what one pod adds to the picture."""
        c = self.c
        spec = pod.spec
        i = c.index.get(spec.node_name)
        if i is None or pod.status.phase in _FINISHED:
            return
        annotations = pod.metadata.annotations
        if annotations is not None and k8s_pods.MIRROR_POD_ANNOTATION in annotations:
            return
        sign = 1 if added else -1
        node = c.nodes[i]
        if self.tainted[i] and k8s_taints.untolerated_taint(
            node.spec.taints, spec.tolerations, _SCHED_EFFECTS
        ):
            self.n_taints += sign
        aff = spec.affinity
        node_affinity = aff.node_affinity if aff is not None else None
        required = (
            node_affinity.required_during_scheduling_ignored_during_execution
            if node_affinity is not None
            else None
        )
        if spec.node_selector or required is not None:
            key = (_encode((spec.node_selector, required)), i)  # (_affinity_shape)
            ok = self._affinity.get(key)
            if ok is None:
                ok = self._affinity[key] = k8s_affinity.pod_matches_node_selector(pod, node)
            if not ok:
                self.n_affinity += sign
        if aff is not None:
            anti = aff.pod_anti_affinity
            terms = anti.required_during_scheduling_ignored_during_execution if anti is not None else None
            if terms:
                if added:
                    memo_key = _encode((pod.metadata.namespace, terms))
                    indexes = self._anti_terms.get(memo_key)
                    if indexes is None:
                        indexes = self._anti_terms[memo_key] = _anti_term_indexes(c, pod, terms)
                    self.anti[id(pod)] = (pod, i, indexes)
                else:
                    del self.anti[id(pod)]
        tscs = spec.topology_spread_constraints
        if tscs:
            memo_key = _spread_key(pod, tscs, required)
            ids = self._spread_ids.get(memo_key)
            if ids is None:
                ids = self._spread_ids[memo_key] = _spread_ids(pod, tscs)
            for sid, at, required_keys in ids:
                declared = self.declared.setdefault(sid, [])
                if added:
                    declared.append((pod, at, required_keys))
                else:
                    for k, entry in enumerate(declared):
                        if entry[0] is pod:
                            del declared[k]
                            break
                    if not declared:
                        del self.declared[sid]

    def picture(self, extra_specs: Mapping[str, _SpreadSpec] | None) -> ClusterPicture:
        c = self.c
        snapshot = self.snapshot
        usage: list[NodeUsage] = []
        for i in sorted(range(c.n), key=c.names.__getitem__):
            name = c.names[i]
            alloc = self.alloc[i]
            used = snapshot.requested_on(name)
            usage.append(
                NodeUsage(
                    name,
                    _percent(used.get(CPU, 0), alloc.get(CPU, 0)),
                    _percent(used.get(MEMORY, 0), alloc.get(MEMORY, 0)),
                    _percent(snapshot.pod_count_on(name), alloc.get(PODS, 0)),
                )
            )
        labels = c.labels
        n_anti = sum(
            1 for pod, i, indexes in self.anti.values() if _violates_anti_affinity(c, pod, labels[i], indexes)
        )
        violations = dict(zip(VIOLATION_KINDS, (self.n_taints, self.n_affinity, n_anti, 0), strict=True))
        specs: dict[str, _SpreadSpec] = {}
        for sid, declared in self.declared.items():
            pod, at, required_keys = declared[0]
            tscs = pod.spec.topology_spread_constraints
            assert tscs is not None
            specs[sid] = _SpreadSpec(pod, tscs[at], required_keys)
        for sid, extra in (extra_specs or {}).items():
            specs.setdefault(sid, extra)
        skews: list[ConstraintSkew] = []
        for sid in sorted(
            specs, key=lambda s: (specs[s].pod.metadata.namespace, specs[s].constraint.topology_key, s)
        ):
            entry = _constraint_skew(c, sid, specs[sid])
            if entry is None:
                continue
            skews.append(entry)
            if entry.when_unsatisfiable == _DO_NOT_SCHEDULE:
                violations["topologySpread"] += entry.excess
        return ClusterPicture(usage, skews, violations, specs, self)


def _percent(used: int, allocatable: int) -> float:
    return 100.0 * used / allocatable if allocatable > 0 else 0.0


def _anti_term_indexes(c: _Cluster, pod: Pod, terms: list[PodAffinityTerm]) -> list[tuple[str, _TermIndex]]:
    """The pod's required anti-affinity terms' indexes (terms with an invalid selector left out)."""
    out: list[tuple[str, _TermIndex]] = []
    for term in terms:
        try:
            out.append((term.topology_key, c.term_index(pod, term)))
        except k8s_labels.SelectorError:
            continue
    return out


def _violates_anti_affinity(
    c: _Cluster, pod: Pod, labels: Mapping[str, str], indexes: list[tuple[str, _TermIndex]]
) -> bool:
    """Whether another pod in the domain of the pod's node matches one of its anti-affinity
    terms."""
    for key, ti in indexes:
        value = labels.get(key)
        if value is None:
            continue
        if ti.domain_counts(key, c.labels).get(value, 0) - (1 if ti.matches(pod) else 0) > 0:
            return True
    return False


def _spread_key(pod: Pod, tscs: list[TopologySpreadConstraint], required: object) -> bytes:
    """What the ids of a pod's spread constraints depend on (``required``: its required node
    affinity)."""
    extra: list[tuple[str, str]] = []
    if any(t.match_label_keys for t in tscs):
        labels = pod.metadata.labels or {}
        keys = sorted({k for t in tscs for k in t.match_label_keys or () if k in labels})
        extra = [(k, labels[k]) for k in keys]
    spec = pod.spec
    return _encode((pod.metadata.namespace, tscs, extra, spec.node_selector, required, spec.tolerations))


def _spread_ids(pod: Pod, tscs: list[TopologySpreadConstraint]) -> list[tuple[str, int, tuple[str, ...]]]:
    """Per spread constraint of the pod: its id, position and the topology keys of the pod's
    constraints of the same kind."""
    out: list[tuple[str, int, tuple[str, ...]]] = []
    for at, tsc in enumerate(tscs):
        same_kind = [t.topology_key for t in tscs if t.when_unsatisfiable == tsc.when_unsatisfiable]
        out.append((_spec_id(pod, tsc), at, tuple(sorted(set(same_kind)))))
    return out


def _constraint_skew(c: _Cluster, sid: str, spec: _SpreadSpec) -> ConstraintSkew | None:
    pod, tsc = spec.pod, spec.constraint
    labels = pod.metadata.labels or {}
    try:
        selector = k8s_labels.compile_label_selector(tsc.label_selector, none_matches=False)
    except k8s_labels.SelectorError:
        return None
    extra = tuple((k, labels[k]) for k in tsc.match_label_keys or () if k in labels)
    match = _spread_matcher(selector, extra)
    eligible = c.eligible(pod, spec.required_keys, tsc)
    ns = pod.metadata.namespace
    sel = tsc.label_selector
    counter = c._counter(
        ("sel", ns, _encode(sel), extra, tsc.topology_key, id(eligible)),
        ns,
        tsc.topology_key,
        match,
        eligible,
        lambda: c.candidates(ns, sel),
        _bucket(ns, sel),
    )
    counts = counter.counts
    return ConstraintSkew(
        sid,
        ns,
        tsc.topology_key,
        tsc.max_skew,
        tsc.when_unsatisfiable,
        _selector_text(sel, extra),
        tsc.min_domains,
        _declared_by(pod),
        len(counter.domains),
        sum(counts.values()),
        counter.skew(tsc.min_domains),
        counter.excess(tsc.min_domains, tsc.max_skew),
    )


# =============================================================================== cycles: the driver


class EvictionRecorder:
    """The simulated eviction backend, remembering the evicted pods for placement."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.pods: dict[str, Pod] = {}

    def evict(self, pod: Pod, request: object) -> str | None:
        self.snapshot.remove_pod(pod)
        self.pods[pod.key] = pod
        return None


class _EvictionLike(Protocol):
    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def node(self) -> str: ...
    @property
    def profile(self) -> str: ...
    @property
    def plugin(self) -> str: ...


class _NodeActionLike(Protocol):
    @property
    def node(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def effect(self) -> str: ...
    @property
    def result(self) -> object: ...


class CycleLike(Protocol):
    """What the driver reads of a cycle's result (``desched.framework.framework.CycleResult``)."""

    @property
    def evictions(self) -> Sequence[_EvictionLike]: ...
    @property
    def skipped(self) -> str | None: ...
    @property
    def node_actions(self) -> Sequence[_NodeActionLike]: ...


C = TypeVar("C", bound=CycleLike)


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """What became of one evicted pod (or of a replacement that was still Pending)."""

    cycle: int
    namespace: str
    #: The evicted pod.
    name: str
    evicted_from: str
    outcome: str
    #: The replacement's name ("" when gone).
    replacement: str = ""
    #: Where the replacement lands ("" unless placed).
    node: str = ""
    #: Pending: kube-scheduler's message; gone: why nothing replaces the pod.
    reason: str = ""
    priority: int = 0
    score: int | None = None
    #: ``profile/plugin`` that evicted it ("" for a retried pending replacement).
    evicted_by: str = ""
    #: A Pending replacement of an earlier cycle, tried again.
    retried: bool = False

    @property
    def same_node(self) -> bool:
        return self.outcome == PLACED and self.node == self.evicted_from


@dataclass(frozen=True, slots=True)
class Thrash:
    """A sign that the policy does not converge."""

    cycle: int
    #: :data:`THRASH_SAME_NODE` or :data:`THRASH_RE_EVICTED`.
    kind: str
    namespace: str
    name: str
    node: str
    detail: str


@dataclass
class CyclePlacement(Generic[C]):
    cycle: int
    result: C
    placements: list[PodPlacement] = field(default_factory=list)
    thrashing: list[Thrash] = field(default_factory=list)
    seconds: float = 0.0

    def outcomes(self, outcome: str) -> list[PodPlacement]:
        return [p for p in self.placements if p.outcome == outcome]


@dataclass
class Simulation(Generic[C]):
    """Cycles, where their evicted pods went, and the cluster before the first and after the last."""

    cycles: list[CyclePlacement[C]]
    before: ClusterPicture
    after: ClusterPicture
    options: PlacementOptions
    placement: bool
    #: Why the cycles stopped.
    stop_reason: str
    #: A cycle evicted nothing: the policy reached a fixed point.
    converged: bool

    @property
    def placements(self) -> list[PodPlacement]:
        return [p for c in self.cycles for p in c.placements]

    @property
    def thrashing(self) -> list[Thrash]:
        return [t for c in self.cycles for t in c.thrashing]


def _suffix(seed: str) -> str:
    digest = hashlib.sha1(seed.encode()).digest()
    return "".join(_NAME_CHARS[b % len(_NAME_CHARS)] for b in digest[:5])


def _replacement_name(snapshot: ClusterSnapshot, pod: Pod, cycle: int) -> str:
    refs = pod.metadata.owner_references or []
    ref = k8s_pods.controller_ref(pod) or (refs[0] if refs else None)
    if ref is not None and ref.kind == "StatefulSet":
        return pod.metadata.name  # a StatefulSet re-creates the pod under its name
    base = ref.name if ref is not None and ref.name else pod.metadata.name
    for attempt in range(1000):
        name = f"{base}-{_suffix(f'{pod.key}/{cycle}/{attempt}')}"
        if snapshot.pod(pod.metadata.namespace, name) is None:
            return name
    return f"{base}-{_suffix(pod.key)}-{cycle}"  # pragma: no cover - 1000 collisions


def _replacement(pod: Pod, name: str, now: datetime, cycle: int) -> Pod:
    """The pod as its controller would create it again: new name and uid, unbound, Pending."""
    uid_hex = hashlib.sha1(f"{pod.key}/{name}/{cycle}".encode()).hexdigest()
    uid = f"{uid_hex[:8]}-{uid_hex[8:12]}-{uid_hex[12:16]}-{uid_hex[16:20]}-{uid_hex[20:32]}"
    meta = msgspec.structs.replace(
        pod.metadata,
        name=name,
        uid=uid,
        resource_version="",
        creation_timestamp=now,
        deletion_timestamp=None,
    )
    spec = msgspec.structs.replace(pod.spec, node_name="")
    return Pod(metadata=meta, spec=spec, status=PodStatus(phase="Pending", qos_class=pod.status.qos_class))


def _bound(pod: Pod, node: str, now: datetime) -> Pod:
    """The replacement once bound to ``node`` and started."""
    running = ContainerState(running=ContainerStateRunning(started_at=now))
    statuses = [ContainerStatus(name=c.name, ready=True, state=running) for c in pod.spec.containers]
    conditions = [
        PodCondition(type=t, status="True", last_transition_time=now)
        for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
    ]
    return Pod(
        metadata=pod.metadata,
        spec=msgspec.structs.replace(pod.spec, node_name=node),
        status=PodStatus(
            phase="Running",
            start_time=now,
            qos_class=pod.status.qos_class,
            conditions=conditions,
            container_statuses=statuses,
        ),
    )


def _unschedulable(pod: Pod, message: str, now: datetime) -> Pod:
    condition = PodCondition(
        type="PodScheduled", status="False", reason="Unschedulable", message=message, last_transition_time=now
    )
    status = msgspec.structs.replace(pod.status, phase="Pending", conditions=[condition])
    return msgspec.structs.replace(pod, status=status)


def _nodes_after_actions(snapshot: ClusterSnapshot, actions: Sequence[_NodeActionLike]) -> list[Node] | None:
    """The nodes as the cycle's node actions (downgrades, restores) would leave them."""
    changes = [a for a in actions if str(a.result) in ("downgraded", "extended", "unchanged", "restored")]
    if not changes:
        return None
    by_name = {n.metadata.name: n for n in snapshot.nodes}
    for a in changes:
        node = by_name.get(a.node)
        if node is None:
            continue
        taints = list(node.spec.taints or ())
        labels = dict(node.metadata.labels or {})
        if a.action == "restore":
            if a.method == "taint":
                taints = [t for t in taints if not (t.key == a.key and t.effect == a.effect)]
            else:
                labels.pop(a.key, None)
        elif a.method == "taint":
            if not any(t.key == a.key and t.effect == a.effect for t in taints):
                taints.append(Taint(key=a.key, value=a.value, effect=a.effect))
        else:
            labels[a.key] = a.value
        by_name[a.node] = msgspec.structs.replace(
            node,
            metadata=msgspec.structs.replace(node.metadata, labels=labels),
            spec=msgspec.structs.replace(node.spec, taints=taints),
        )
    return list(by_name.values())


def _terminating(pod: Pod, now: datetime) -> Pod:
    """The evicted pod while it terminates: still bound, with a deletionTimestamp."""
    meta = msgspec.structs.replace(pod.metadata, deletion_timestamp=now)
    return msgspec.structs.replace(pod, metadata=meta)


class _Placer:
    """One cycle's placements: kube-scheduler's view of the cluster while the cycle evicts (see
    :class:`PlacementOptions` ``order`` and ``terminating``) and the outcome of every replacement."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        options: PlacementOptions,
        result: CycleLike,
        now: datetime,
        cycle: int,
        run: CyclePlacement[Any],
        replacement_of: dict[str, tuple[str, int]],
    ) -> None:
        self.snapshot = snapshot
        self.options = options
        self.nodes = _nodes_after_actions(snapshot, result.node_actions)
        self.now = now
        self.cycle = cycle
        self.run = run
        self.replacement_of = replacement_of
        #: the replacements still Pending after the cycle (tried again after the next one)
        self.carried: list[_Queued] = []
        # each placed or pending replacement's outcome, in the order first tried
        self._outcomes: list[PodPlacement] = []
        self._at: dict[int, int] = {}
        self._done = 0
        self._progress: Callable[[], None] = lambda: None

    def replay(
        self,
        retried: list[_Queued],
        evicted: list[tuple[Pod, _Queued | None]],
        progress: ProgressFn,
    ) -> None:
        """Place the Pending replacements of earlier cycles, then the replacements of this
        cycle's ``evicted`` pods (in eviction order), as the options say."""
        snapshot, options, k = self.snapshot, self.options, self.cycle
        total = len(retried) + sum(q is not None for _, q in evicted)
        self._progress = lambda: progress(f"cycle {k}: placing pods", self._done, total)
        hold = options.terminating == TERMINATING_HOLD
        if options.order == ORDER_AFTER_CYCLE and not hold:
            # every evicted pod gone, then the scheduling queue: higher priority first, then
            # first queued first
            at_once = retried + [q for _, q in evicted if q is not None]
            at_once.sort(key=lambda q: -q.priority)
            sim = PlacementSimulator(snapshot, options, nodes=self.nodes)
            for q in at_once:
                self._place(sim, q)
            self._finish()
            return
        # kube-scheduler's view: the evicted pods are still there until deleted (or terminated)
        for pod, _ in evicted:
            snapshot.add_pod(pod)
        sim = PlacementSimulator(snapshot, options, nodes=self.nodes)
        for q in sorted(retried, key=lambda q: -q.priority):
            self._place(sim, q)
        terminating: list[Pod] = []
        # a StatefulSet re-creates its pod under the same name only once the old one is gone
        later: list[_Queued] = []
        queue: list[_Queued] = []
        for pod, maybe in evicted:
            if hold:
                gone = _terminating(pod, self.now)
                sim.terminate(pod, gone)
                terminating.append(gone)
            else:
                sim.unbind(pod)
            if maybe is None:
                continue
            if hold and maybe.pod.metadata.name == pod.metadata.name:
                later.append(maybe)
            elif options.order == ORDER_INTERLEAVED:
                self._place(sim, maybe)
            else:
                queue.append(maybe)
        queue.sort(key=lambda q: -q.priority)
        for q in queue:
            self._place(sim, q)
        # the terminating pods are gone; kube-scheduler tries the Pending replacements again
        # (a deleted pod is a cluster event that requeues them), higher priority first
        for gone in terminating:
            snapshot.remove_pod(gone)
        again = self.carried + later
        self.carried = []
        if again:
            sim = PlacementSimulator(snapshot, options, nodes=self.nodes)
            for q in sorted(again, key=lambda q: -q.priority):
                self._place(sim, q)
        self._finish()

    def _place(self, sim: PlacementSimulator, q: _Queued) -> None:
        k, now, run = self.cycle, self.now, self.run
        if not self._done % _PROGRESS_EVERY:
            self._progress()
        self._done += 1
        pod = q.pod
        decision = sim.decide(pod)
        ns, rname = pod.metadata.namespace, pod.metadata.name
        if decision.node:
            sim.bind(_bound(pod, decision.node, now))
            outcome = PodPlacement(
                k,
                ns,
                q.original,
                q.evicted_from,
                PLACED,
                rname,
                decision.node,
                priority=q.priority,
                score=decision.score,
                evicted_by=q.evicted_by,
                retried=q.retried,
            )
            if outcome.same_node:
                run.thrashing.append(
                    Thrash(
                        k,
                        THRASH_SAME_NODE,
                        ns,
                        q.original,
                        decision.node,
                        f"replacement {rname} lands back on {decision.node}, where {q.original} was "
                        "evicted from",
                    )
                )
        else:
            self.snapshot.add_pod(_unschedulable(pod, decision.reason, now))
            self.carried.append(q)
            outcome = PodPlacement(
                k,
                ns,
                q.original,
                q.evicted_from,
                PENDING,
                rname,
                reason=decision.reason,
                priority=q.priority,
                evicted_by=q.evicted_by,
                retried=q.retried,
            )
        at = self._at.get(id(q))
        if at is None:
            self._at[id(q)] = len(self._outcomes)
            self._outcomes.append(outcome)
        else:
            self._outcomes[at] = outcome  # tried again: the last attempt is the outcome
        self.replacement_of[f"{ns}/{rname}"] = (f"{ns}/{q.original}", k)

    def _finish(self) -> None:
        self.run.placements.extend(self._outcomes)
        self._progress()


@dataclass
class _Queued:
    pod: Pod  # the replacement, unbound
    original: str  # the evicted pod's name
    evicted_from: str
    evicted_by: str
    priority: int
    retried: bool


def simulate(
    snapshot: ClusterSnapshot,
    run_cycle: Callable[[ClusterSnapshot, EvictionRecorder, int], C],
    *,
    now: datetime,
    cycles: int = 1,
    options: PlacementOptions | None = None,
    placement: bool = True,
    on_progress: ProgressFn | None = None,
) -> Simulation[C]:
    """Run up to ``cycles`` descheduling cycles on ``snapshot`` (mutated), placing each cycle's
    evicted pods again before the next one; stop early when a cycle evicts nothing.

    ``run_cycle(snapshot, backend, k)`` runs cycle ``k`` with ``backend`` as its eviction backend.
    """
    if cycles < 1:
        raise ValueError(f"cycles must be at least 1, got {cycles}")
    # as Framework.run_cycle: many short-lived objects next to a large live snapshot would make
    # the cyclic collector rescan the snapshot again and again; reference counting frees the rest
    with gc_paused():
        return _simulate(
            snapshot, run_cycle, now, cycles, options or PlacementOptions(), placement, on_progress
        )


def _simulate(
    snapshot: ClusterSnapshot,
    run_cycle: Callable[[ClusterSnapshot, EvictionRecorder, int], C],
    now: datetime,
    cycles: int,
    options: PlacementOptions,
    placement: bool,
    on_progress: ProgressFn | None,
) -> Simulation[C]:
    progress: ProgressFn = on_progress or (lambda phase, done, total: None)
    progress("measuring the cluster", 0, 1)
    before = cluster_picture(snapshot)
    classes = snapshot.priority_classes
    default_class = k8s_priority.global_default_class(classes)
    runs: list[CyclePlacement[C]] = []
    replacement_of: dict[str, tuple[str, int]] = {}
    carried: list[_Queued] = []
    stop_reason = f"ran the {cycles} cycle(s) asked for"
    converged = False
    for k in range(1, cycles + 1):
        progress(f"cycle {k}: descheduling", 0, 1)
        recorder = EvictionRecorder(snapshot)
        result = run_cycle(snapshot, recorder, k)
        run = CyclePlacement(k, result)
        runs.append(run)
        evictions = list(result.evictions)
        for e in evictions:
            key = f"{e.namespace}/{e.name}"
            earlier = replacement_of.get(key)
            if earlier is not None:
                original, cycle = earlier
                run.thrashing.append(
                    Thrash(
                        k,
                        THRASH_RE_EVICTED,
                        e.namespace,
                        e.name,
                        e.node,
                        f"replacement of {original} (evicted in cycle {cycle}) evicted again by "
                        f"{e.profile}/{e.plugin}",
                    )
                )
        if result.skipped:
            stop_reason = f"cycle {k} was skipped: {result.skipped}"
            break
        if not evictions:
            stop_reason = f"cycle {k} evicted nothing"
            converged = True
            break
        if not placement:
            continue
        t0 = time.perf_counter()
        retried: list[_Queued] = []
        for q in carried:
            current = snapshot.pod(q.pod.metadata.namespace, q.pod.metadata.name)
            if current is not None and not current.spec.node_name and k8s_pods.occupies_node(current):
                retried.append(_Queued(current, q.original, q.evicted_from, "", q.priority, True))
        carried = []
        # the evicted pods in eviction order, each with its replacement (None: gone)
        evicted: list[tuple[Pod, _Queued | None]] = []
        for e in evictions:
            pod = recorder.pods.get(f"{e.namespace}/{e.name}")
            by = f"{e.profile}/{e.plugin}"
            if pod is None:
                continue
            priority = k8s_priority.resolve_pod_priority(pod, classes, default_class)
            gone_reason = ""
            if k8s_pods.is_bare_pod(pod):
                gone_reason = "bare pod: nothing re-creates it"
            elif not k8s_pods.occupies_node(pod):
                gone_reason = (
                    f"{pod.status.phase} pod: its controller already counted it as finished "
                    "and does not re-create it"
                )
            if gone_reason:
                run.placements.append(
                    PodPlacement(
                        k,
                        e.namespace,
                        e.name,
                        e.node,
                        GONE,
                        reason=gone_reason,
                        priority=priority,
                        evicted_by=by,
                    )
                )
                evicted.append((pod, None))
                continue
            name = _replacement_name(snapshot, pod, k)
            queued = _Queued(_replacement(pod, name, now, k), e.name, e.node, by, priority, False)
            evicted.append((pod, queued))
        placer = _Placer(snapshot, options, result, now, k, run, replacement_of)
        placer.replay(retried, evicted, progress)
        carried = placer.carried
        run.seconds = time.perf_counter() - t0
    progress("measuring the cluster", 0, 1)
    after = cluster_picture(snapshot, before.specs, since=before)
    after.state = None
    return Simulation(runs, before, after, options, placement, stop_reason, converged)
