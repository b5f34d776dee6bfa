"""RemovePodsViolatingNodeAffinity: evict pods whose node affinity is better met elsewhere.

Node affinity is checked when a pod is scheduled only ("IgnoredDuringExecution"). For each entry
of ``nodeAffinityType``, in order, and each node given to the plugin (upstream ``node_affinity.go``):

- ``requiredDuringSchedulingIgnoredDuringExecution``: a pod that has a required node affinity is
  evicted when its node no longer matches its ``nodeSelector`` and required affinity, and the pod
  fits some node given to the plugin (descheduler's ``PodFitsAnyNode`` / NodeFit checks);
- ``preferredDuringSchedulingIgnoredDuringExecution``: a pod that has preferred node-affinity
  terms is evicted when some node given to the plugin scores higher on them (the sum of the
  weights of the matching terms) than its own node, and the pod fits some node given to the
  plugin, its own included. As upstream, the best-scoring node need not be one the pod fits;
  DefaultEvictor's ``nodeFit`` is the guard against evicting towards nowhere.

Pods are also subject to the ``namespaces`` and ``labelSelector`` args and the profile's evictor
filters. Unknown ``nodeAffinityType`` values are accepted, as upstream, and do nothing (a warning
is logged). The per-node limit moves on to the next node; the total limit ends the plugin.

Cost: upstream spends most of a large cycle here, because it asks "does the pod fit any node?"
for every pod before asking whether the pod violates anything. desched asks the cheap questions
first and answers them once per pod *shape* per call:

- whether a node matches a required affinity, per (nodeSelector + required affinity, node);
- a node's preferred score, per (preferred terms, the node's values of the label keys those
  terms read), so nodes that look alike to the terms are scored once; the best score over the
  nodes is computed once per shape, and not at all for a pod already on a top-scoring node;
- the fit question only for the few pods that do violate, through the memoised
  :mod:`desched.scheduling.nodefit`, which stops at the first node that fits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import ClassVar

import msgspec
from pydantic import field_validator

from desched.api.types import ArgsModel, LabelSelectorArg, Namespaces
from desched.framework.types import EvictResult, Handle, Status
from desched.k8s import affinity as k8s_affinity
from desched.k8s.objects import Node, NodeAffinity, Pod, PreferredSchedulingTerm
from desched.plugins.common import pod_selector
from desched.scheduling import nodefit

log = logging.getLogger(__name__)

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
NODE_AFFINITY_TYPES = (REQUIRED, PREFERRED)

_encode = msgspec.msgpack.Encoder().encode


class RemovePodsViolatingNodeAffinityArgs(ArgsModel):
    namespaces: Namespaces | None = None
    label_selector: LabelSelectorArg | None = None
    #: Required, as upstream ("nodeAffinityType needs to be set"). Values other than the two
    #: known types are accepted, as upstream, and ignored with a warning.
    node_affinity_type: list[str]

    @field_validator("node_affinity_type", mode="after")
    @classmethod
    def _not_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError(f"must not be empty: list {' and/or '.join(NODE_AFFINITY_TYPES)}")
        return value


def _node_affinity(pod: Pod) -> NodeAffinity | None:
    affinity = pod.spec.affinity
    return affinity.node_affinity if affinity is not None else None


class _RequiredShape:
    """Pods sharing a nodeSelector and required node affinity: which nodes they match."""

    __slots__ = ("matches", "pod")

    def __init__(self, pod: Pod) -> None:
        self.pod = pod  # compiled once, through this pod's selector objects
        self.matches: dict[str, bool] = {}

    def matches_node(self, node: Node) -> bool:
        name = node.metadata.name
        hit = self.matches.get(name)
        if hit is None:
            hit = self.matches[name] = k8s_affinity.pod_matches_node_selector(self.pod, node)
        return hit


class _PreferredShape:
    """Pods sharing preferred node-affinity terms: the score of a node, and the best score."""

    __slots__ = ("best", "keys", "max_score", "pod", "scores", "uses_fields")

    def __init__(self, pod: Pod, terms: list[PreferredSchedulingTerm]) -> None:
        self.pod = pod
        keys: dict[str, None] = {}
        uses_fields = False
        max_score = 0
        for t in terms:
            for expr in t.preference.match_expressions or ():
                keys[expr.key] = None
            if t.preference.match_fields:
                uses_fields = True
            if t.weight > 0:
                max_score += t.weight
        self.keys = tuple(keys)
        self.uses_fields = uses_fields
        #: No node can score more (invalid or empty terms never match, so it may be unreachable).
        self.max_score = max_score
        self.scores: dict[tuple[str | None, ...], int] = {}
        self.best: int | None = None

    def score(self, node: Node) -> int:
        labels = node.metadata.labels or {}
        view = tuple(labels.get(k) for k in self.keys)
        if self.uses_fields:
            view += (node.metadata.name,)
        hit = self.scores.get(view)
        if hit is None:
            hit = self.scores[view] = k8s_affinity.preferred_node_affinity_score(self.pod, node)
        return hit

    def best_score(self, nodes: Sequence[Node]) -> int:
        if self.best is None:
            best = 0
            for node in nodes:
                s = self.score(node)
                if s > best:
                    best = s
                    if best >= self.max_score:
                        break
            self.best = best
        return self.best


class RemovePodsViolatingNodeAffinity:
    name: ClassVar[str] = "RemovePodsViolatingNodeAffinity"
    Args: ClassVar[type[RemovePodsViolatingNodeAffinityArgs]] = RemovePodsViolatingNodeAffinityArgs

    def __init__(self, args: RemovePodsViolatingNodeAffinityArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._selected = pod_selector(args.namespaces, args.label_selector)
        self.affinity_types = list(args.node_affinity_type)
        for t in self.affinity_types:
            if t not in NODE_AFFINITY_TYPES:
                log.warning(
                    "%s: nodeAffinityType %r is not one of %s; it is ignored",
                    self.name,
                    t,
                    ", ".join(NODE_AFFINITY_TYPES),
                )

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        for affinity_type in self.affinity_types:
            if affinity_type == REQUIRED:
                stop = self._process(nodes, self._required_violations(nodes))
            elif affinity_type == PREFERRED:
                stop = self._process(nodes, self._preferred_violations(nodes))
            else:
                continue
            if stop:
                break
        return None

    # ------------------------------------------------------------------ the two rules

    def _required_violations(self, nodes: Sequence[Node]) -> Callable[[Pod, Node], str | None]:
        snapshot = self.handle.snapshot
        ev = self.handle.evictor
        selected = self._selected
        shapes: dict[bytes, _RequiredShape] = {}

        def why(pod: Pod, node: Node) -> str | None:
            node_affinity = _node_affinity(pod)
            if node_affinity is None:
                return None
            required = node_affinity.required_during_scheduling_ignored_during_execution
            if required is None or not selected(pod):
                return None
            key = _encode((pod.spec.node_selector, required))
            shape = shapes.get(key)
            if shape is None:
                shape = shapes[key] = _RequiredShape(pod)
            if shape.matches_node(node):
                return None
            if not ev.filter(pod):
                return None
            # The pod's own node does not match, so "any node" and "any other node" agree.
            if not nodefit.pod_fits_any_other_node(snapshot, pod, nodes):
                return None
            return f"node {node.metadata.name} no longer matches the pod's required node affinity"

        return why

    def _preferred_violations(self, nodes: Sequence[Node]) -> Callable[[Pod, Node], str | None]:
        snapshot = self.handle.snapshot
        ev = self.handle.evictor
        selected = self._selected
        shapes: dict[bytes, _PreferredShape] = {}

        def why(pod: Pod, node: Node) -> str | None:
            node_affinity = _node_affinity(pod)
            if node_affinity is None:
                return None
            terms = node_affinity.preferred_during_scheduling_ignored_during_execution
            if not terms or not selected(pod):
                return None
            key = _encode(terms)
            shape = shapes.get(key)
            if shape is None:
                shape = shapes[key] = _PreferredShape(pod, terms)
            current = shape.score(node)
            if current >= shape.max_score:
                return None
            best = shape.best_score(nodes)
            if best <= current:
                return None
            if not ev.filter(pod):
                return None
            if not (
                nodefit.pod_fits_current_node(snapshot, pod, node)
                or nodefit.pod_fits_any_other_node(snapshot, pod, nodes)
            ):
                return None
            return (
                f"a node scores {best} on the pod's preferred node affinity, "
                f"node {node.metadata.name} only {current}"
            )

        return why

    # ------------------------------------------------------------------ eviction

    def _process(self, nodes: Sequence[Node], why: Callable[[Pod, Node], str | None]) -> bool:
        """Evict the violating pods of each node; True when the total limit stops the plugin."""
        snapshot = self.handle.snapshot
        ev = self.handle.evictor
        for node in nodes:
            reasons: dict[str, str] = {}
            violators: list[Pod] = []
            for pod in snapshot.pods_on_node(node.metadata.name):
                reason = why(pod, node)
                if reason is not None:
                    reasons[pod.key] = reason
                    violators.append(pod)
            if not violators:
                continue
            for pod in self.handle.sort_pods(violators):
                result = ev.evict(pod, reason=reasons[pod.key])
                if result is EvictResult.NODE_LIMIT:
                    break
                if result is EvictResult.TOTAL_LIMIT:
                    return True
        return False
