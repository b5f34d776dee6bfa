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

Pods that have finished (Succeeded or Failed) are not considered, as upstream lists a node's pods
(``ListPodsOnANode``). Pods are also subject to the ``namespaces`` and ``labelSelector`` args and
the profile's evictor filters. Unknown ``nodeAffinityType`` values are accepted, as upstream, and
do nothing (a warning is logged). The per-node limit moves on to the next node; the total limit
ends the plugin.

With ``evictionPolicy.predictive``, the predicted move of a pod evicted because its node no
longer matches its required affinity needs nothing more (the placement model, as kube-scheduler,
only puts the replacement on a matching node); a pod evicted for its preferred affinity is left
where it is unless its replacement's node scores strictly higher on the preferred terms than its
own (skip reason ``predicted_not_preferred``).

Cost: upstream spends most of a large cycle here, because it asks "does the pod fit any node?"
for every pod before asking whether the pod violates anything. desched asks the cheap questions
first and answers them once per pod *shape* per call:

- whether a node matches a required affinity, per (nodeSelector + required affinity, node);
- a node's preferred score, per (preferred terms, the node's values of the label keys those
  terms read), so nodes that look alike to the terms are scored once; the best score over the
  nodes is computed once per shape, and not at all for a pod already on a top-scoring node;
- the fit question only for the few pods that do violate, through the memoised
  the handle's node fit (``handle.fits_other_node``), which stops at the first node that fits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

from desched.framework import ClusterView, Handle, NoGain, PredictedMove, Status
from desched.k8s import affinity as k8s_affinity
from desched.k8s.objects import Node, Pod, PreferredSchedulingTerm
from desched.k8s.pods import occupies_node
from desched.plugins._shared import ContentKeys, pod_selector, select_all
from desched.plugins.removepodsviolatingnodeaffinity.args import (
    NODE_AFFINITY_TYPES,
    PREFERRED,
    REQUIRED,
    RemovePodsViolatingNodeAffinityArgs,
)

log = logging.getLogger(__name__.rpartition(".")[0])  # the plugin's package: --vmodule names the folder

#: A node's violating pods, each with the reason.
_Violations = Callable[[Node], list[tuple[Pod, str]]]


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

    __slots__ = ("best", "by_node", "keys", "max_score", "pod", "scores", "uses_fields")

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
        self.by_node: dict[str, int] = {}
        self.best: int | None = None

    def score(self, node: Node) -> int:
        name = node.metadata.name
        hit = self.by_node.get(name)
        if hit is not None:
            return hit
        labels = node.metadata.labels or {}
        view = tuple([labels.get(k) for k in self.keys])
        if self.uses_fields:
            view += (name,)
        hit = self.scores.get(view)
        if hit is None:
            hit = self.scores[view] = k8s_affinity.preferred_node_affinity_score(self.pod, node)
        self.by_node[name] = hit
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


class _AffinePods:
    """The pods of each node that have a node affinity, for the passes of one call: read once;
    a later pass gets the same list without the pods removed from the snapshot since (in a
    simulation, those evicted meanwhile), as ``pods_on_node`` would give them."""

    __slots__ = ("_additions", "_read", "_snapshot")

    def __init__(self, snapshot: ClusterView) -> None:
        self._snapshot = snapshot
        self._additions = snapshot.additions
        #: node name -> (how many pods the node had, those with a node affinity, in order)
        self._read: dict[str, tuple[int, list[Pod]]] = {}

    def on(self, node_name: str) -> list[Pod]:
        pods = self._snapshot.pods_on_node(node_name)
        hit = self._read.get(node_name)
        if hit is not None and self._snapshot.additions == self._additions:
            count, affine = hit
            if len(pods) == count:  # no pod was added, none removed
                return affine
            present = set(map(id, pods))
            affine = [p for p in affine if id(p) in present]
        else:
            self._additions = self._snapshot.additions
            affine = [
                p
                for p in pods
                if p.spec.affinity is not None
                and p.spec.affinity.node_affinity is not None
                and occupies_node(p)  # finished pods are not listed (upstream's ListPodsOnANode)
            ]
        self._read[node_name] = (len(pods), affine)
        return affine


class RemovePodsViolatingNodeAffinity:
    name: ClassVar[str] = "RemovePodsViolatingNodeAffinity"
    #: The profile's PreSort plugins order the pods it considers on each node.
    presorts: ClassVar[bool] = True
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

    def judge_move(self, move: PredictedMove) -> NoGain | None:
        """A pod whose node still matches its required affinity moved for its preferred terms:
        the replacement's node must score higher on them than the pod's own."""
        pod, source, target = move.pod, move.source, move.destination
        if PREFERRED not in self.affinity_types:
            return None
        if REQUIRED in self.affinity_types and not k8s_affinity.pod_matches_node_selector(pod, source):
            return None  # evicted for its required affinity: the placement honours it
        here = k8s_affinity.preferred_node_affinity_score(pod, source)
        there = k8s_affinity.preferred_node_affinity_score(pod, target)
        if there > here:
            return None
        return NoGain(
            "predicted_not_preferred",
            f"its replacement would land on {target.metadata.name}, which scores {there} on its "
            f"preferred node affinity, not more than {source.metadata.name}'s {here}",
        )

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        affine = _AffinePods(self.handle.snapshot)
        for affinity_type in self.affinity_types:
            if affinity_type == REQUIRED:
                stop = self._process(nodes, self._required_violations(nodes, affine))
            elif affinity_type == PREFERRED:
                stop = self._process(nodes, self._preferred_violations(nodes, affine))
            else:
                continue
            if stop:
                break
        return None

    # ------------------------------------------------------------------ the two rules

    def _required_violations(self, nodes: Sequence[Node], affine: _AffinePods) -> _Violations:
        """The pods of a node that violate their required node affinity, with the reason."""
        ev = self.handle.evictor
        selected = None if self._selected is select_all else self._selected
        shapes: dict[tuple[bytes, bytes], _RequiredShape] = {}
        content = ContentKeys()

        findings = self.handle.findings

        def violations(node: Node) -> list[tuple[Pod, str]]:
            out: list[tuple[Pod, str]] = []
            for pod in affine.on(node.metadata.name):
                spec = pod.spec
                affinity = spec.affinity
                node_affinity = affinity.node_affinity if affinity is not None else None
                if node_affinity is None:
                    continue
                required = node_affinity.required_during_scheduling_ignored_during_execution
                if required is None or (selected is not None and not selected(pod)):
                    continue
                key = (content(spec.node_selector), content(required))
                shape = shapes.get(key)
                if shape is None:
                    shape = shapes[key] = _RequiredShape(pod)
                if shape.matches_node(node):
                    if findings.enabled:
                        findings.left(pod, f"node {node.metadata.name} matches the required node affinity")
                    continue
                if not ev.filter(pod):
                    continue
                # The pod's own node does not match, so "any node" and "any other node" agree.
                if not self.handle.fits_other_node(pod, nodes):
                    if findings.enabled:
                        findings.left(pod, "violates its required node affinity, but fits no other node")
                    continue
                out.append(
                    (pod, f"node {node.metadata.name} no longer matches the pod's required node affinity")
                )
            return out

        return violations

    def _preferred_violations(self, nodes: Sequence[Node], affine: _AffinePods) -> _Violations:
        """The pods of a node that some node given to the plugin suits better, with the reason."""
        ev = self.handle.evictor
        selected = None if self._selected is select_all else self._selected
        shapes: dict[bytes, _PreferredShape] = {}
        content = ContentKeys()

        findings = self.handle.findings

        def violations(node: Node) -> list[tuple[Pod, str]]:
            out: list[tuple[Pod, str]] = []
            for pod in affine.on(node.metadata.name):
                affinity = pod.spec.affinity
                node_affinity = affinity.node_affinity if affinity is not None else None
                if node_affinity is None:
                    continue
                terms = node_affinity.preferred_during_scheduling_ignored_during_execution
                if not terms or (selected is not None and not selected(pod)):
                    continue
                key = content(terms)
                shape = shapes.get(key)
                if shape is None:
                    shape = shapes[key] = _PreferredShape(pod, terms)
                current = shape.score(node)
                if current >= shape.max_score:
                    if findings.enabled:
                        findings.left(pod, f"node {node.metadata.name} has the top preferred score {current}")
                    continue
                best = shape.best_score(nodes)
                if best <= current:
                    if findings.enabled:
                        findings.left(pod, f"no node scores above {current} on the preferred node affinity")
                    continue
                if not ev.filter(pod):
                    continue
                if not (self.handle.fits_node(pod, node) or self.handle.fits_other_node(pod, nodes)):
                    continue
                out.append(
                    (
                        pod,
                        f"a node scores {best} on the pod's preferred node affinity, "
                        f"node {node.metadata.name} only {current}",
                    )
                )
            return out

        return violations

    # ------------------------------------------------------------------ eviction

    def _process(self, nodes: Sequence[Node], violations: _Violations) -> bool:
        """Evict the violating pods of each node; True when the total limit stops the plugin."""
        ev = self.handle.evictor
        for node in nodes:
            found = violations(node)
            if not found:
                continue
            reasons = {id(pod): reason for pod, reason in found}
            # PreSort: the order the violators are considered in; Sort keeps it among its ties
            considered = self.handle.presort_pods([pod for pod, _ in found])

            def reason(pod: Pod, reasons: dict[int, str] = reasons) -> str:
                return reasons[id(pod)]

            if ev.evict_in_order(self.handle.sort_pods(considered), reason):
                return True
        return False


if TYPE_CHECKING:  # mypy checks the class against what it serves (upstream: var _ DeschedulePlugin = &X{})
    from desched.framework import DeschedulePlugin, HasPreSortStep, JudgesMoves

    _deschedule_plugin: type[DeschedulePlugin] = RemovePodsViolatingNodeAffinity
    _judges_moves: type[JudgesMoves] = RemovePodsViolatingNodeAffinity
    _has_pre_sort_step: type[HasPreSortStep] = RemovePodsViolatingNodeAffinity
