"""RemovePodsViolatingInterPodAntiAffinity: evict pods whose required anti-affinity no longer holds.

A pod's ``podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution`` terms say which pods
must not share its topology domain. They are checked when the pod is scheduled only; a pod that
arrives later, or a node relabelled into the same domain, can break them. This plugin evicts the
pods whose own terms are violated (upstream ``pod_antiaffinity.go``):

- the pods considered, as candidates and as the pods that violate a term, are those on the nodes
  given to the plugin that have not finished (Succeeded and Failed pods are not listed, as
  upstream's ``ListPodsOnANode``) and pass its ``namespaces`` and ``labelSelector`` args (not the evictor's
  filters: a pod that cannot be evicted still violates a term of its neighbours);
- a candidate violates a term when another considered pod in the term's namespaces matches the
  term's label selector and runs on the candidate's node, or on a node whose ``topologyKey``
  label has the same value as the candidate node's;
- nodes are processed in the given order, each node's pods from low to high priority
  (``SortPodsBasedOnPriorityLowToHigh``, after the profile's Sort plugins); a pod that is evicted
  stops counting as a violator for the pods processed after it, so of two pods that repel each
  other only the lower-priority one is evicted;
- the per-node limit moves on to the next node; the total limit ends the plugin.

Where desched differs from upstream, deliberately: a term's ``namespaceSelector`` is honoured as
kube-scheduler honours it (upstream only reads ``namespaces``, so a term with
``namespaceSelector: {}`` would only see its own namespace); and a pod is told apart from the
candidate by namespace and name (upstream compares names only, so a same-named pod in another
namespace never counts).

Cost: no scan of pods against pods. The considered pods are indexed by namespace and, lazily, by the label
keys the terms select on; each distinct term (per candidate namespace) counts its matching pods
per topology domain once, and an eviction decrements those counts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from desched.framework import ClusterView, EvictResult, Handle, Status
from desched.k8s import affinity as k8s_affinity
from desched.k8s import labels as k8s_labels
from desched.k8s.objects import LabelSelector, Node, Pod, PodAffinityTerm
from desched.k8s.pods import occupies_node
from desched.plugins._shared import (
    ContentKeys,
    PodPredicate,
    pod_selector,
    priority_low_to_high_key,
    select_all,
)
from desched.plugins.removepodsviolatinginterpodantiaffinity.args import (
    RemovePodsViolatingInterPodAntiAffinityArgs,
)

log = logging.getLogger(__name__.rpartition(".")[0])  # the plugin's package: --vmodule names the folder

_anti_terms = k8s_affinity.required_pod_anti_affinity_terms
#: A candidate list this short is narrow enough: no further label index is built to narrow it.
_FEW = 32


class _TermCounts:
    """How many considered pods one term selects in each topology domain of its key."""

    __slots__ = ("domains", "selector")

    def __init__(self, selector: k8s_affinity.TermSelector, topology_key: str) -> None:
        self.selector = selector
        #: a node without the label is a domain of its own (as upstream's check)
        self.domains = k8s_affinity.DomainCounts((topology_key,), node_without_key_is_a_domain=True)

    def add(self, node: Node, delta: int) -> None:
        self.domains.add(node.metadata.labels or {}, node.metadata.name, delta)


class _ConsideredPods:
    """The pods the plugin compares: those of the given nodes that ``selected`` takes. Read
    lazily, by namespace, and indexed by label key and value.

    A namespace is read when a term first looks at it, maybe after evictions by the plugin: in a
    simulation those pods are gone from the snapshot by then, elsewhere they are still there; either
    way ``evicted`` has them, and counts leave them out.
    """

    def __init__(self, snapshot: ClusterView, nodes: Mapping[str, Node], selected: PodPredicate | None):
        self._snapshot = snapshot
        self._nodes = nodes
        self._selected = selected
        self._by_namespace: dict[str, list[Pod]] = {}
        #: ids of the considered pods evicted so far (they stay referenced by ``_by_namespace``)
        self.evicted: set[int] = set()
        self._label_index: dict[tuple[str, str], dict[str, list[Pod]]] = {}

    def in_namespace(self, namespace: str) -> list[Pod]:
        pods = self._by_namespace.get(namespace)
        if pods is None:
            nodes = self._nodes
            selected = self._selected
            pods = [
                p
                for p in self._snapshot.pods_in_namespace(namespace)
                if p.spec.node_name in nodes and occupies_node(p) and (selected is None or selected(p))
            ]
            self._by_namespace[namespace] = pods
        return pods

    def namespaces(self) -> set[str]:
        """The namespaces having considered pods (a pass over the pods of the given nodes)."""
        selected = self._selected
        return {
            p.metadata.namespace
            for name in self._nodes
            for p in self._snapshot.pods_on_node(name)
            if occupies_node(p) and (selected is None or selected(p))
        }

    def _index(self, namespace: str, key: str) -> dict[str, list[Pod]]:
        idx = self._label_index.get((namespace, key))
        if idx is None:
            idx = {}
            pods = self._by_namespace.get(namespace)
            if pods is None:  # (read the namespace's pods once, without a list of them)
                nodes = self._nodes
                selected = self._selected
                for pod in self._snapshot.pods_in_namespace(namespace):
                    value = (pod.metadata.labels or {}).get(key)
                    if (
                        value is not None
                        and pod.spec.node_name in nodes
                        and occupies_node(pod)
                        and (selected is None or selected(pod))
                    ):
                        same = idx.get(value)
                        if same is None:
                            idx[value] = [pod]
                        else:
                            same.append(pod)
            else:
                for pod in pods:
                    value = (pod.metadata.labels or {}).get(key)
                    if value is not None:
                        idx.setdefault(value, []).append(pod)
            self._label_index[(namespace, key)] = idx
        return idx

    def candidates(self, namespace: str, selector: LabelSelector) -> Iterable[Pod]:
        """A superset of the pods of ``namespace`` that ``selector`` can match, as small as the
        selector's equality, In and Exists requirements allow."""
        best: list[Pod] | None = None

        def consider(pods: list[Pod]) -> None:
            nonlocal best
            if best is None or len(pods) < len(best):
                best = pods

        # Each index costs a pass over the namespace: stop at the first small enough superset.
        for key, value in (selector.match_labels or {}).items():
            consider(self._index(namespace, key).get(value, []))
            if best is not None and len(best) <= _FEW:
                return best
        for expr in selector.match_expressions or ():
            if expr.operator == "In":
                idx = self._index(namespace, expr.key)
                consider([p for v in dict.fromkeys(expr.values or ()) for p in idx.get(v, ())])
            elif expr.operator == "Exists":
                consider([p for pods in self._index(namespace, expr.key).values() for p in pods])
            if best is not None and len(best) <= _FEW:
                return best
        if best is not None:
            return best
        return self.in_namespace(namespace)


class RemovePodsViolatingInterPodAntiAffinity:
    name: ClassVar[str] = "RemovePodsViolatingInterPodAntiAffinity"
    Args: ClassVar[type[RemovePodsViolatingInterPodAntiAffinityArgs]] = (
        RemovePodsViolatingInterPodAntiAffinityArgs
    )

    def __init__(self, args: RemovePodsViolatingInterPodAntiAffinityArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._selected = pod_selector(args.namespaces, args.label_selector)

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        _Cycle(self.handle, None if self._selected is select_all else self._selected, nodes).run()
        return None


class _Cycle:
    """One deschedule call, upstream's loop in named steps: the :meth:`candidates` by node, each
    node's from low to high priority, evicted when a term is violated (:meth:`violation`), and
    :meth:`forget` the evicted ones, which no longer violate the terms of the pods after them."""

    def __init__(self, handle: Handle, selected: PodPredicate | None, nodes: Sequence[Node]) -> None:
        self.handle = handle
        self.nodes = nodes
        self.selected = selected
        self.node_map = {n.metadata.name: n for n in nodes}
        self.considered = _ConsideredPods(handle.snapshot, self.node_map, selected)
        findings = handle.findings
        self.left = findings.left if findings.enabled else None  # reasons only when someone listens
        self.term_namespaces = k8s_affinity.TermNamespaces(handle.snapshot)
        self.content = ContentKeys()
        #: (term content, candidate namespace) -> the term's counts
        self.counts: dict[tuple[bytes, str], _TermCounts] = {}
        #: namespace -> the counts of the terms that select pods in it
        self.counts_by_namespace: dict[str, list[_TermCounts]] = {}

    def run(self) -> None:
        with_terms = self.candidates()
        ev = self.handle.evictor
        for node in self.nodes:
            on_node = with_terms.get(node.metadata.name)
            if not on_node:
                continue
            order = ev.in_order(self.handle.sort_pods(on_node, key=priority_low_to_high_key))
            for pod in order:
                violation = self.violation(pod, node)
                if violation is None:
                    if self.left is not None:
                        self.left(pod, _why_held(pod, node))
                    continue
                result = order.evict(pod, _why_evicted(node, *violation))
                # a pod predictive leaves counts as moved: its partners are not evicted instead
                if result.gone or result is EvictResult.NO_GAIN:
                    self.forget(pod, node)
            if order.stopped:
                return

    def candidates(self) -> dict[str, list[Pod]]:
        """Node -> its considered pods that have required anti-affinity terms."""
        snapshot = self.handle.snapshot
        selected = self.selected
        left = self.left
        with_terms: dict[str, list[Pod]] = {}
        for name in self.node_map:
            having: list[Pod] = []
            for pod in snapshot.pods_on_node(name):
                affinity = pod.spec.affinity  # (inline: every pod of the given nodes passes here)
                if (
                    affinity is not None
                    and affinity.pod_anti_affinity is not None
                    and affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution
                    and occupies_node(pod)
                ):
                    if selected is None or selected(pod):
                        having.append(pod)
                    elif left is not None:
                        left(pod, "not selected by the plugin's namespaces/labelSelector")
            if having:
                with_terms[name] = having
        return with_terms

    def term_counts(self, pod: Pod, term: PodAffinityTerm) -> _TermCounts:
        """The counts of ``pod``'s ``term``, shared by the candidates of its namespace with an
        equal term; made on first use from the considered pods not evicted so far."""
        key = (self.content(term), pod.metadata.namespace)
        tc = self.counts.get(key)
        if tc is None:
            tc = self.counts[key] = _TermCounts(
                k8s_affinity.TermSelector(pod, term, self.term_namespaces), term.topology_key
            )
            selector = tc.selector
            if term.label_selector is not None and selector.match is not k8s_labels.match_nothing:
                considered = self.considered
                node_map = self.node_map
                match = selector.match
                add = tc.domains.add
                for ns in sorted(selector.namespaces):
                    for other in considered.candidates(ns, term.label_selector):
                        if id(other) not in considered.evicted and match(other.metadata.labels or {}):
                            node = node_map[other.spec.node_name]
                            add(node.metadata.labels or {}, node.metadata.name)
            for ns in selector.namespaces:
                self.counts_by_namespace.setdefault(ns, []).append(tc)
        return tc

    def violation(self, pod: Pod, node: Node) -> tuple[PodAffinityTerm, int] | None:
        """The first of ``pod``'s terms that another pod in its domain violates, and how many do."""
        labels = node.metadata.labels or {}
        for term in _anti_terms(pod):
            tc = self.term_counts(pod, term)
            others = tc.domains.in_domain(term.topology_key, labels, node.metadata.name)
            if others and tc.selector.selects(pod):
                others -= 1  # the pod itself
            if others > 0:
                return term, others
        return None

    def forget(self, pod: Pod, node: Node) -> None:
        """``pod`` is gone (or going): it no longer counts for the terms of the pods after it."""
        self.considered.evicted.add(id(pod))
        labels = pod.metadata.labels or {}
        for tc in self.counts_by_namespace.get(pod.metadata.namespace, ()):
            if tc.selector.match(labels):
                tc.add(node, -1)


def _why_evicted(node: Node, term: PodAffinityTerm, others: int) -> str:
    value = (node.metadata.labels or {}).get(term.topology_key)
    return (
        f"pod violates its required inter-pod anti-affinity: {others} other matching "
        f"pod(s) in its topology domain {term.topology_key}={value}"
    )


def _why_held(pod: Pod, node: Node) -> str:
    """Why a pod that violates none of its terms stays (for the findings)."""
    terms = _anti_terms(pod)
    labels = node.metadata.labels or {}
    domains = []
    for term in terms:
        value = labels.get(term.topology_key)
        domains.append(
            f"{term.topology_key}={value}"
            if value is not None
            else f"node {node.metadata.name} (no {term.topology_key} label)"
        )
    where = ", ".join(dict.fromkeys(domains))
    if len(terms) == 1:
        return f"no other pod matches its anti-affinity term in its topology domain {where}"
    return f"no other pod matches any of its {len(terms)} anti-affinity terms in their domains {where}"


if TYPE_CHECKING:  # mypy checks the class against what it serves (upstream: var _ DeschedulePlugin = &X{})
    from desched.framework import DeschedulePlugin

    _deschedule_plugin: type[DeschedulePlugin] = RemovePodsViolatingInterPodAntiAffinity
