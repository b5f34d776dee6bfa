"""Node fit: would a pod be admitted by a node if it were scheduled again? (descheduler's NodeFit)

The checks are upstream's ``pkg/descheduler/node/node.go`` ``NodeFit``, in the cheap-first order
of upstream #1681, and stop at the first that fails:

1. the node is not unschedulable (cordoned);
2. the pod's ``nodeSelector`` and required node affinity match the node;
3. the pod tolerates every ``NoSchedule`` and ``NoExecute`` taint of the node;
4. inter-pod anti-affinity: no pod on *that node* matches one of the pod's own
   ``requiredDuringScheduling`` anti-affinity terms, where the node carries the term's
   ``topologyKey`` label. As upstream: a term's namespaces are its ``namespaces`` list or else the
   pod's own namespace (``namespaceSelector`` is not read), a nil label selector matches nothing,
   an invalid one makes every node fail, and the anti-affinity of the pods already on the node
   against the incoming pod is *not* considered. Other nodes of the same topology domain are not
   looked at either (kube-scheduler would); desched keeps upstream's decisions here. The pod
   never conflicts with itself (desched compares namespace/name, upstream the name only);
5. resources, skipped on the pod's own node (it is already counted there): every resource the
   pod requests must fit in the node's allocatable (its capacity when a hand-written snapshot
   has no allocatable; upstream would see 0) minus the requests of the pods occupying it
   (all assigned pods but Succeeded and Failed ones); a requested extended resource the node does
   not offer has 0 free; and at least one pod slot (allocatable ``pods`` minus the occupying
   pods) must be free.

Speed (built for 5,000 nodes and 150,000 pods): everything is read from the snapshot's indexes and memoised
per snapshot (``ClusterSnapshot.version`` / ``.additions`` tell when memos are stale):

- per node: allocatable parsed once;
- per (pod shape, node): the static checks 1-3, where the shape is the pod's node selector,
  required node affinity and tolerations (the pods of one workload share it); nodes never change
  within a snapshot, so these are computed at most once per shape and node;
- per (shape, node list): the nodes passing the static checks, so ``pod_fits_*`` only walks nodes
  that could take the pod at all: O(nodes) once per shape, then O(feasible nodes) per question;
- per anti-affinity term (selector, namespaces): an index node → matching occupying pods, built
  with one pass over the pods of the term's namespaces (only those having the label of its first
  ``matchLabels`` pair, through a per-namespace label index); both survive evictions (removed pods
  are skipped) and are rebuilt only after ``add_pod``;
- per (fit key, node list): the first two nodes the pod fits as a newcomer, which answers
  "any other node" for every replica whatever node it sits on. The fit key is the shape plus the
  requests (plus the pod itself when it has anti-affinity terms). Evicting a pod only frees room,
  so found fits stay valid until a pod is added; a missing fit is looked for again after any
  change. Node lists are recognised by identity, so callers asking repeatedly should pass the
  same list object (DefaultEvictor does).

So asking again, or after an eviction, costs a memo lookup rather than a walk over the nodes; the
figures are in docs/performance.md ("Figures behind the code").
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import msgspec

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s import affinity as k8s_affinity
from desched.k8s import labels as k8s_labels
from desched.k8s import nodes as k8s_nodes
from desched.k8s import resources as k8s_resources
from desched.k8s import taints as k8s_taints
from desched.k8s._compile_cache import ContentKeys
from desched.k8s.objects import Node, Pod, PodAffinityTerm
from desched.k8s.resources import Resources

__all__ = [
    "ANTI_AFFINITY",
    "NODE_SELECTOR_MISMATCH",
    "UNSCHEDULABLE",
    "UNTOLERATED_TAINT",
    "node_fit_failures",
    "pod_fits_any_node",
    "pod_fits_any_other_node",
    "pod_fits_current_node",
]

UNSCHEDULABLE: Final = "node is not schedulable"
NODE_SELECTOR_MISMATCH: Final = "pod node selector does not match the node label"
UNTOLERATED_TAINT: Final = "pod does not tolerate taints on the node"
ANTI_AFFINITY: Final = "pod matches inter-pod anti-affinity rule of other pod on node"

_SCHEDULING_EFFECTS: Final = (k8s_taints.TAINT_NO_SCHEDULE, k8s_taints.TAINT_NO_EXECUTE)
_BASIC: Final = frozenset((k8s_resources.CPU, k8s_resources.MEMORY, k8s_resources.PODS))
_encode = msgspec.msgpack.Encoder().encode


# --------------------------------------------------------------------------- per-pod facts


class _AntiTerm:
    """One required anti-affinity term, compiled."""

    __slots__ = ("error", "index_key", "match", "namespaces", "narrow", "topology_key")

    def __init__(self, pod: Pod, term: PodAffinityTerm) -> None:
        self.topology_key = term.topology_key
        self.namespaces: tuple[str, ...] = tuple(sorted(set(term.namespaces or ()) or {pod.namespace}))
        self.error: str | None = None
        self.match: k8s_labels.Matcher = k8s_labels.match_nothing
        try:
            self.match = k8s_labels.compile_label_selector(term.label_selector, none_matches=False)
        except k8s_labels.SelectorError as e:
            self.error = f"invalid inter-pod anti-affinity label selector: {e}"
        self.index_key = (_encode(term.label_selector), self.namespaces)
        #: A label (key, value) every pod the selector matches has: where to look for them.
        self.narrow: tuple[str, str] | None = None
        selector = term.label_selector
        if selector is not None and selector.match_labels:
            self.narrow = next(iter(selector.match_labels.items()))


class _PodInfo:
    __slots__ = ("anti_terms", "fit_key", "pod", "requests", "shape")

    def __init__(self, ctx: _Context, pod: Pod) -> None:
        snapshot = ctx.snapshot
        self.pod = pod
        spec = pod.spec
        aff = spec.affinity
        required_node = (
            aff.node_affinity.required_during_scheduling_ignored_during_execution
            if aff is not None and aff.node_affinity is not None
            else None
        )
        content = ctx.content
        #: Equal node selector, required node affinity and tolerations, equal number.
        self.shape: int = ctx.shape_number(
            (content(spec.node_selector), content(required_node), content(spec.tolerations))
        )
        # The snapshot caches requests by pod key; a pod object that is not the snapshot's own
        # (a caller's hypothetical pod) gets its own computation.
        if snapshot.pod(pod.namespace, pod.name) is pod:
            self.requests: Resources = snapshot.requests(pod)
        else:
            self.requests = k8s_resources.pod_requests(pod)
        terms = (
            aff.pod_anti_affinity.required_during_scheduling_ignored_during_execution
            if aff is not None and aff.pod_anti_affinity is not None
            else None
        )
        self.anti_terms: tuple[_AntiTerm, ...] = tuple(_AntiTerm(pod, t) for t in terms or ())
        anti_key: object = None
        if self.anti_terms:
            anti_key = (pod.key, tuple((*t.index_key, t.topology_key) for t in self.anti_terms))
        self.fit_key = (self.shape, tuple(sorted(self.requests.items())), anti_key)


class _NodeInfo:
    __slots__ = ("allocatable", "labels", "name", "node")

    def __init__(self, snapshot: ClusterSnapshot, node: Node) -> None:
        self.node = node
        self.name = node.metadata.name
        self.labels: Mapping[str, str] = node.metadata.labels or {}
        self.allocatable: Resources = snapshot.allocatable(node)


_AntiIndex = dict[str, list[Pod]]


class _Context:
    """Everything memoised for one snapshot (see the module docstring)."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.pods: dict[str, _PodInfo] = {}
        self.nodes: dict[str, _NodeInfo] = {}
        #: content keys of pods' records (replicas often share theirs)
        self.content = ContentKeys()
        #: (node selector, required node affinity, tolerations) content -> shape number
        self.shapes: dict[tuple[bytes, bytes, bytes], int] = {}
        #: shape -> node name -> first failing static reason, "" when all pass
        self.static: dict[int, dict[str, str]] = {}
        #: (selector, namespaces) -> (snapshot.additions when built, node -> matching pods)
        self.anti: dict[tuple[bytes, tuple[str, ...]], tuple[int, _AntiIndex]] = {}
        #: (namespace, label key) -> (snapshot.additions when built, label value -> its pods)
        self.labelled: dict[tuple[str, str], tuple[int, dict[str, list[Pod]]]] = {}
        #: (shape, id(nodes)) -> (nodes, len, the nodes passing the static checks, in list order)
        self.feasible: dict[tuple[int, int], tuple[Sequence[Node], int, list[_NodeInfo]]] = {}
        #: (fit key, id(nodes)) -> (nodes, len, version, additions, first fit, next fit elsewhere)
        self.answers: dict[
            tuple[object, int], tuple[Sequence[Node], int, int, int, str | None, str | None]
        ] = {}
        #: id(nodes) -> (nodes, len, their names)
        self.names: dict[int, tuple[Sequence[Node], int, frozenset[str]]] = {}

    def pod_info(self, pod: Pod) -> _PodInfo:
        key = pod.key
        info = self.pods.get(key)
        if info is None or info.pod is not pod:
            info = _PodInfo(self, pod)
            self.pods[key] = info
        return info

    def shape_number(self, shape: tuple[bytes, bytes, bytes]) -> int:
        return self.shapes.setdefault(shape, len(self.shapes))

    def node_info(self, node: Node) -> _NodeInfo:
        name = node.metadata.name
        info = self.nodes.get(name)
        if info is None or info.node is not node:
            if info is not None:  # a different object under a known name: start over
                self.static.clear()
                self.feasible.clear()
                self.answers.clear()
            info = _NodeInfo(self.snapshot, node)
            self.nodes[name] = info
        return info

    # ---------------------------------------------------------------- checks

    def static_failure(self, pinfo: _PodInfo, ninfo: _NodeInfo) -> str:
        by_node = self.static.get(pinfo.shape)
        if by_node is None:
            by_node = self.static[pinfo.shape] = {}
        reason = by_node.get(ninfo.name)
        if reason is None:
            reason = _static_failure(pinfo.pod, ninfo.node)
            by_node[ninfo.name] = reason
        return reason

    def anti_index(self, term: _AntiTerm) -> _AntiIndex:
        snap = self.snapshot
        hit = self.anti.get(term.index_key)
        if hit is not None and hit[0] == snap.additions:
            return hit[1]
        index: _AntiIndex = {}
        match = term.match
        narrow = term.narrow
        for ns in term.namespaces:
            # (the labelled pods may include some removed since: anti_affinity_failure skips them)
            pods = snap.pods_in_namespace(ns) if narrow is None else self.labelled_pods(ns, *narrow)
            for p in pods:
                node = p.spec.node_name
                if node and p.status.phase not in ("Succeeded", "Failed") and match(p.metadata.labels or {}):
                    index.setdefault(node, []).append(p)
        self.anti[term.index_key] = (snap.additions, index)
        return index

    def labelled_pods(self, namespace: str, key: str, value: str) -> list[Pod]:
        """The pods of the namespace with label ``key=value`` (and maybe some removed since)."""
        snap = self.snapshot
        hit = self.labelled.get((namespace, key))
        if hit is None or hit[0] != snap.additions:
            by_value: dict[str, list[Pod]] = {}
            for p in snap.pods_in_namespace(namespace):
                v = (p.metadata.labels or {}).get(key)
                if v is not None:
                    pods = by_value.get(v)
                    if pods is None:
                        by_value[v] = [p]
                    else:
                        pods.append(p)
            hit = self.labelled[(namespace, key)] = (snap.additions, by_value)
        return hit[1].get(value, [])

    def anti_affinity_failure(self, pinfo: _PodInfo, ninfo: _NodeInfo) -> str:
        snap = self.snapshot
        for term in pinfo.anti_terms:
            if term.error is not None:
                return term.error
            if term.topology_key not in ninfo.labels:
                continue
            for other in self.anti_index(term).get(ninfo.name, ()):
                if other.key != pinfo.pod.key and not snap.was_removed(other):
                    return ANTI_AFFINITY
        return ""

    def resource_failures(self, pinfo: _PodInfo, ninfo: _NodeInfo, all_reasons: bool) -> list[str]:
        snap = self.snapshot
        alloc = ninfo.allocatable
        used = snap.requested_on(ninfo.name)
        free_pods = alloc.get(k8s_resources.PODS, 0) - snap.pod_count_on(ninfo.name)
        out: list[str] = []
        for name, amount in pinfo.requests.items():
            if name == k8s_resources.PODS:
                free = free_pods
            elif name in _BASIC or name in alloc:
                free = alloc.get(name, 0) - used.get(name, 0)
            else:
                free = 0
            if amount > free:
                out.append(f"insufficient {name}")
                if not all_reasons:
                    return out
        if free_pods <= 0:
            out.append(f"insufficient {k8s_resources.PODS}")
        return out

    def failures(self, pod: Pod, node: Node, all_reasons: bool) -> list[str]:
        pinfo = self.pod_info(pod)
        ninfo = self.node_info(node)
        out: list[str] = []
        if all_reasons:
            out.extend(r for r in _static_failures(pod, node) if r)
        else:
            reason = self.static_failure(pinfo, ninfo)
            if reason:
                return [reason]
        if pinfo.anti_terms:
            reason = self.anti_affinity_failure(pinfo, ninfo)
            if reason:
                out.append(reason)
                if not all_reasons:
                    return out
        if pod.spec.node_name != ninfo.name:
            out.extend(self.resource_failures(pinfo, ninfo, all_reasons))
        return out

    def fits(self, pinfo: _PodInfo, node: Node) -> bool:
        """NodeFit, resources skipped on the pod's own node."""
        ninfo = self.node_info(node)
        if self.static_failure(pinfo, ninfo):
            return False
        if pinfo.anti_terms and self.anti_affinity_failure(pinfo, ninfo):
            return False
        return pinfo.pod.spec.node_name == ninfo.name or not self.resource_failures(pinfo, ninfo, False)

    def feasible_nodes(self, pinfo: _PodInfo, nodes: Sequence[Node]) -> list[_NodeInfo]:
        """The nodes of ``nodes`` that pass the static checks for the pod's shape."""
        key = (pinfo.shape, id(nodes))
        hit = self.feasible.get(key)
        if hit is not None and hit[0] is nodes and hit[1] == len(nodes):
            return hit[2]
        out = []
        for node in nodes:
            ninfo = self.node_info(node)
            if not self.static_failure(pinfo, ninfo):
                out.append(ninfo)
        self.feasible[key] = (nodes, len(nodes), out)
        return out

    def two_fits(self, pinfo: _PodInfo, nodes: Sequence[Node]) -> tuple[str | None, str | None]:
        """The first node of ``nodes`` the pod fits as a newcomer (its requests counted on every
        node, its own included), and the next such node with another name."""
        snap = self.snapshot
        key = (pinfo.fit_key, id(nodes))
        hit = self.answers.get(key)
        # evictions only free room: fits found before still hold until a pod is added
        if (
            hit is not None
            and hit[0] is nodes
            and hit[1] == len(nodes)
            and (hit[2] == snap.version or (hit[5] is not None and hit[3] == snap.additions))
        ):
            return hit[4], hit[5]
        first: str | None = None
        second: str | None = None
        anti = bool(pinfo.anti_terms)
        for ninfo in self.feasible_nodes(pinfo, nodes):
            if ninfo.name == first:
                continue
            if anti and self.anti_affinity_failure(pinfo, ninfo):
                continue
            if self.resource_failures(pinfo, ninfo, False):
                continue
            if first is None:
                first = ninfo.name
            else:
                second = ninfo.name
                break
        self.answers[key] = (nodes, len(nodes), snap.version, snap.additions, first, second)
        return first, second

    def node_names(self, nodes: Sequence[Node]) -> frozenset[str]:
        hit = self.names.get(id(nodes))
        if hit is not None and hit[0] is nodes and hit[1] == len(nodes):
            return hit[2]
        names = frozenset(n.metadata.name for n in nodes)
        self.names[id(nodes)] = (nodes, len(nodes), names)
        return names

    def fits_any_other(self, pod: Pod, nodes: Sequence[Node]) -> bool:
        own = pod.spec.node_name
        first, second = self.two_fits(self.pod_info(pod), nodes)
        return (first is not None and first != own) or (second is not None and second != own)

    def fits_any(self, pod: Pod, nodes: Sequence[Node]) -> bool:
        pinfo = self.pod_info(pod)
        if self.two_fits(pinfo, nodes)[0] is not None:
            return True
        # on its own node the pod is already counted: check it there without its requests
        own = pod.spec.node_name
        if own and own in self.node_names(nodes):
            for node in nodes:
                if node.metadata.name == own:
                    return self.fits(pinfo, node)
        return False


def _static_failures(pod: Pod, node: Node) -> list[str]:
    return [
        UNSCHEDULABLE if k8s_nodes.is_node_unschedulable(node) else "",
        "" if k8s_affinity.pod_matches_node_selector(pod, node) else NODE_SELECTOR_MISMATCH,
        "" if k8s_taints.pod_tolerates_node_taints(pod, node, _SCHEDULING_EFFECTS) else UNTOLERATED_TAINT,
    ]


def _static_failure(pod: Pod, node: Node) -> str:
    if k8s_nodes.is_node_unschedulable(node):
        return UNSCHEDULABLE
    if not k8s_affinity.pod_matches_node_selector(pod, node):
        return NODE_SELECTOR_MISMATCH
    if not k8s_taints.pod_tolerates_node_taints(pod, node, _SCHEDULING_EFFECTS):
        return UNTOLERATED_TAINT
    return ""


# --------------------------------------------------------------------------- the context per snapshot

_contexts: weakref.WeakKeyDictionary[ClusterSnapshot, _Context] = weakref.WeakKeyDictionary()
_last: list[tuple[Callable[[], ClusterSnapshot | None], _Context]] = []


def _context(snapshot: ClusterSnapshot) -> _Context:
    if _last:
        ref, last = _last[0]
        if ref() is snapshot:
            return last
    ctx = _contexts.get(snapshot)
    if ctx is None:
        ctx = _Context(snapshot)
        _contexts[snapshot] = ctx
    _last[:] = [(weakref.ref(snapshot), ctx)]
    return ctx


# --------------------------------------------------------------------------- the API


def node_fit_failures(
    snapshot: ClusterSnapshot, pod: Pod, node: Node, *, all_reasons: bool = False
) -> list[str]:
    """Why ``pod`` would not fit ``node`` (``[]``: it fits).

    By default the checks stop at the first failure, as upstream; ``all_reasons=True`` runs every
    check and reports each failure (for explanations).
    """
    return _context(snapshot).failures(pod, node, all_reasons)


def pod_fits_any_other_node(snapshot: ClusterSnapshot, pod: Pod, nodes: Sequence[Node]) -> bool:
    """The pod fits one of ``nodes`` other than the node it is bound to (``PodFitsAnyOtherNode``)."""
    return _context(snapshot).fits_any_other(pod, nodes)


def pod_fits_any_node(snapshot: ClusterSnapshot, pod: Pod, nodes: Sequence[Node]) -> bool:
    """The pod fits one of ``nodes``, its own node included (``PodFitsAnyNode``)."""
    return _context(snapshot).fits_any(pod, nodes)


def pod_fits_current_node(snapshot: ClusterSnapshot, pod: Pod, node: Node) -> bool:
    """The pod fits ``node`` (``PodFitsCurrentNode``; resources are not checked when ``node`` is
    the pod's own node, where it is already counted)."""
    ctx = _context(snapshot)
    return ctx.fits(ctx.pod_info(pod), node)
