"""RemovePodsViolatingPodAffinity: evict pods whose required pod affinity no longer holds.

A pod's ``podAffinity.requiredDuringSchedulingIgnoredDuringExecution`` terms say which pods it
must share a topology domain with. kube-scheduler checks them when it places the pod only; when
the peers leave (they are deleted, rescheduled elsewhere, or relabelled), the pod stays where it
is. Upstream never shipped this plugin (kubernetes-sigs/descheduler#1286, #1462); it is the
mirror of RemovePodsViolatingInterPodAntiAffinity:

- the candidates are the unfinished pods with required pod affinity on the nodes given to the
  plugin that pass its ``namespaces`` and ``labelSelector`` args;
- a candidate's affinity is judged as kube-scheduler's InterPodAffinity filter would judge it if
  the pod were placed again on its own node, without the pod itself
  (:func:`desched.k8s.affinity.pod_affinity_satisfied`, the same function the placement
  simulator uses): the peers are the unfinished pods, on any node of the cluster, that match
  *all* of its terms (each term's namespaces, ``namespaceSelector`` included, and label selector);
  the node must carry every term's ``topologyKey`` and have a peer in each of those domains,
  unless no peer exists anywhere and the pod matches its own terms (the first pod of a group
  may go anywhere, so evicting it would change nothing);
- a violating candidate is evicted only when another of the given nodes both satisfies its
  affinity (by the same rule) and passes the handle's node fit (``handle.fits_node``): without
  that, its replacement would stay Pending;
- nodes are processed in the given order, each node's pods from low to high priority (after the
  profile's Sort plugins); an evicted pod stops being a peer for the pods processed after it, so
  of two pods that only have each other, in different domains, one goes and the other stays;
- the profile's evictor filters decide each eviction; the per-node limit moves on to the next
  node, the total limit ends the plugin.

Why the peers are not narrowed by ``namespaces``/``labelSelector`` (the anti-affinity sibling
narrows its violators so): a peer hidden from the plugin would make a satisfied pod look
violating, and narrowing may only ever make the plugin evict less.

Cost: candidates sharing a namespace and the same terms share one count of their peers per
topology domain, made from the pods of the first term's namespaces that carry its selector's first
label (a per-namespace label index, built once per key); an eviction decrements the counts that
hold the pod. Checking a candidate is a few dictionary lookups; a violating one looks for another
place only among the nodes of the domains where its peers are.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from desched.framework import ClusterView, Handle, Status
from desched.k8s import affinity as k8s_affinity
from desched.k8s.objects import LabelSelector, Node, Pod, PodAffinityTerm
from desched.k8s.pods import occupies_node
from desched.plugins._shared import ContentKeys, PodPredicate, pod_selector, priority_low_to_high_key
from desched.plugins.removepodsviolatingpodaffinity.args import RemovePodsViolatingPodAffinityArgs

log = logging.getLogger(__name__.rpartition(".")[0])  # the plugin's package: --vmodule names the folder

_affinity_terms = k8s_affinity.required_pod_affinity_terms
PodKey = tuple[str, str]


def _key(pod: Pod) -> PodKey:
    return (pod.metadata.namespace, pod.metadata.name)


class _Peers:
    """The pods matching all the terms of one (namespace, terms) group of candidates, counted per
    topology domain as kube-scheduler counts them (once per term)."""

    __slots__ = ("counted", "domains", "keys", "selectors")

    def __init__(self, keys: Sequence[str], selectors: list[k8s_affinity.TermSelector] | None) -> None:
        self.domains = k8s_affinity.DomainCounts(keys)
        self.keys = self.domains.keys
        #: one per term; None when a term's label selector is invalid (no node could take the pod)
        self.selectors = selectors
        #: the counted pods and the labels of their nodes, so that an eviction can be taken back
        self.counted: dict[PodKey, Mapping[str, str]] = {}

    def matches_all(self, pod: Pod) -> bool:
        if self.selectors is None:
            return False
        namespace = pod.metadata.namespace
        labels = pod.metadata.labels or {}
        for s in self.selectors:  # noqa: SIM110 -- TermSelector.selects inline: the hottest loop
            if namespace not in s.namespaces or not s.match(labels):
                return False
        return True

    def add(self, pod: Pod, node_labels: Mapping[str, str]) -> None:
        self.counted[_key(pod)] = node_labels
        self.domains.add(node_labels, "")

    def remove(self, key: PodKey) -> None:
        node_labels = self.counted.pop(key, None)
        if node_labels is not None:
            self.domains.add(node_labels, "", -1)

    def without(self, pod: Pod) -> Mapping[tuple[str, str], int]:
        """The counts as they would be without ``pod`` (the candidate placed again)."""
        node_labels = self.counted.get(_key(pod))
        return self.domains.counts if node_labels is None else self.domains.without(node_labels)


class _LabelIndex:
    """The pods of a namespace by the value of one label key, made on first use: a superset of the
    pods a term's label selector can match, without a pass over the namespace per term."""

    def __init__(self, snapshot: ClusterView) -> None:
        self.snapshot = snapshot
        self._by_key: dict[tuple[str, str], dict[str, list[Pod]]] = {}

    def _index(self, namespace: str, key: str) -> dict[str, list[Pod]]:
        idx = self._by_key.get((namespace, key))
        if idx is None:
            idx = self._by_key[(namespace, key)] = {}
            for pod in self.snapshot.pods_in_namespace(namespace):
                value = (pod.metadata.labels or {}).get(key)
                if value is not None:
                    idx.setdefault(value, []).append(pod)
        return idx

    def candidates(self, namespace: str, selector: LabelSelector | None) -> Sequence[Pod]:
        """The pods of ``namespace`` that may match ``selector``: those having its first
        ``matchLabels`` pair, or else the values of its first ``In`` (or the key of its first
        ``Exists``) requirement; all of them when it has none of these."""
        if selector is None:
            return ()
        for key, value in (selector.match_labels or {}).items():
            return self._index(namespace, key).get(value, [])
        for expr in selector.match_expressions or ():
            if expr.operator == "In":
                idx = self._index(namespace, expr.key)
                return [p for v in sorted(set(expr.values or ())) for p in idx.get(v, ())]
            if expr.operator == "Exists":
                return [p for pods in self._index(namespace, expr.key).values() for p in pods]
        return self.snapshot.pods_in_namespace(namespace)


class RemovePodsViolatingPodAffinity:
    name: ClassVar[str] = "RemovePodsViolatingPodAffinity"
    Args: ClassVar[type[RemovePodsViolatingPodAffinityArgs]] = RemovePodsViolatingPodAffinityArgs

    def __init__(self, args: RemovePodsViolatingPodAffinityArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._selected = pod_selector(args.namespaces, args.label_selector)

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        _Cycle(self.handle, self._selected, nodes).run()
        return None


class _Cycle:
    """One deschedule call in named steps: the :meth:`candidates` by node, each node's from low to
    high priority, evicted when its affinity fails on its node and holds on another that takes it
    (:meth:`violating`); :meth:`forget` the evicted ones, which are no longer peers of the pods
    after them."""

    def __init__(self, handle: Handle, selected: PodPredicate, nodes: Sequence[Node]) -> None:
        self.handle = handle
        self.selected = selected
        self.nodes = nodes
        findings = handle.findings
        self.left = findings.left if findings.enabled else None  # reasons only when someone listens
        self.term_namespaces = k8s_affinity.TermNamespaces(handle.snapshot)
        self.index = _LabelIndex(handle.snapshot)
        self.content = ContentKeys()
        #: (terms content, candidate namespace) -> the peers of the group
        self.groups: dict[tuple[bytes, str], _Peers] = {}
        #: pod -> the groups that count it as a peer
        self.counted_in: dict[PodKey, list[_Peers]] = {}
        self.evicted: set[PodKey] = set()
        self._nodes_by_value: dict[str, dict[str, list[Node]]] = {}

    def run(self) -> None:
        with_terms = self.candidates()
        ev = self.handle.evictor
        for node in self.nodes:
            on_node = with_terms.get(node.metadata.name)
            if not on_node:
                continue
            order = ev.in_order(self.handle.sort_pods(on_node, key=priority_low_to_high_key))
            for pod in order:
                if not self.violating(pod, node):
                    continue
                reason = (
                    "pod violates its required pod affinity: no matching pod in its domain "
                    f"({_domains(self.peers_of(pod).keys, node)}); another node satisfies it and fits the pod"
                )
                if order.evict(pod, reason).gone:
                    self.forget(pod)
            if order.stopped:
                return

    def candidates(self) -> dict[str, list[Pod]]:
        """Node -> its candidates (pods with required pod affinity the args select)."""
        snapshot = self.handle.snapshot
        selected = self.selected
        left = self.left
        with_terms: dict[str, list[Pod]] = {}
        for node in self.nodes:
            having: list[Pod] = []
            for pod in snapshot.pods_on_node(node.metadata.name):
                if _affinity_terms(pod) and occupies_node(pod):
                    if selected(pod):
                        having.append(pod)
                    elif left is not None:
                        left(pod, "not selected by the plugin's namespaces/labelSelector")
            if having:
                with_terms[node.metadata.name] = having
        return with_terms

    def violating(self, pod: Pod, node: Node) -> bool:
        """Its affinity fails on ``node`` and another given node satisfies it and fits it (the
        reason it stays otherwise goes to the findings)."""
        left = self.left
        peers = self.peers_of(pod)
        if peers.selectors is None:
            if left is not None:
                left(pod, "a term of its pod affinity has an invalid selector (no node could take it)")
            return False
        if self.satisfied(pod, peers, node):
            if left is not None:
                left(pod, f"its required pod affinity holds on its node ({_domains(peers.keys, node)})")
            return False
        for other in self.places(pod, peers):
            if (
                other.metadata.name != node.metadata.name
                and self.satisfied(pod, peers, other)
                and self.handle.fits_node(pod, other)
            ):
                return True
        if left is not None:
            left(
                pod,
                "its required pod affinity no longer holds, but no other node both satisfies it "
                "and fits the pod",
            )
        return False

    def forget(self, pod: Pod) -> None:
        """``pod`` is gone (or going): it no longer is a peer of the pods after it."""
        key = _key(pod)
        self.evicted.add(key)
        for peers in self.counted_in.pop(key, ()):
            peers.remove(key)

    def peers_of(self, pod: Pod) -> _Peers:
        """The peers of ``pod``'s group, counted on first use."""
        terms = _affinity_terms(pod)
        key = (self.content(terms), pod.metadata.namespace)
        peers = self.groups.get(key)
        if peers is None:
            peers = self.groups[key] = self.count_peers(pod, terms)
            for counted in peers.counted:
                self.counted_in.setdefault(counted, []).append(peers)
        return peers

    def count_peers(self, pod: Pod, terms: Sequence[PodAffinityTerm]) -> _Peers:
        """Count, per topology pair, the unfinished pods on the cluster's nodes that match all of
        ``pod``'s ``terms`` (leaving out the pods evicted so far in this cycle)."""
        selectors = [k8s_affinity.TermSelector(pod, term, self.term_namespaces) for term in terms]
        keys = [t.topology_key for t in terms]
        if not all(s.valid for s in selectors):
            return _Peers(keys, None)
        peers = _Peers(keys, selectors)
        snapshot = self.handle.snapshot
        evicted = self.evicted
        for ns in sorted(selectors[0].namespaces):
            for other in self.index.candidates(ns, terms[0].label_selector):
                node_name = other.spec.node_name
                if not node_name or not occupies_node(other) or _key(other) in evicted:
                    continue
                if not peers.matches_all(other):
                    continue
                node = snapshot.node(node_name)
                if node is not None:  # a pod bound to a node the cluster no longer has is nowhere
                    peers.add(other, node.metadata.labels or {})
        return peers

    def satisfied(self, pod: Pod, peers: _Peers, node: Node) -> bool:
        return k8s_affinity.pod_affinity_satisfied(
            peers.keys, node.metadata.labels or {}, peers.without(pod), peers.matches_all(pod)
        )

    def places(self, pod: Pod, peers: _Peers) -> Iterable[Node]:
        """The given nodes that may satisfy the pod's affinity: those in a domain of its first
        topology key with a peer (any node with the keys when it is the first of its group)."""
        counts = peers.without(pod)
        first = peers.keys[0]
        values = sorted({v for (k, v), c in counts.items() if k == first and c > 0})
        if values:
            return (n for v in values for n in self.nodes_with(first, v))
        return self.nodes if peers.matches_all(pod) else ()

    def nodes_with(self, key: str, value: str) -> list[Node]:
        """The given nodes whose label ``key`` is ``value`` (an index per key, made on first use)."""
        by_value = self._nodes_by_value.get(key)
        if by_value is None:
            by_value = self._nodes_by_value[key] = {}
            for n in self.nodes:
                v = (n.metadata.labels or {}).get(key)
                if v is not None:
                    by_value.setdefault(v, []).append(n)
        return by_value.get(value, [])


def _domains(keys: Sequence[str], node: Node) -> str:
    labels = node.metadata.labels or {}
    return ", ".join(dict.fromkeys(f"{k}={labels.get(k)}" for k in keys))


if TYPE_CHECKING:  # mypy checks the class against what it serves (upstream: var _ DeschedulePlugin = &X{})
    from desched.framework import DeschedulePlugin

    _deschedule_plugin: type[DeschedulePlugin] = RemovePodsViolatingPodAffinity
