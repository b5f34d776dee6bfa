"""RemovePodsViolatingNodeTaints: evict pods that do not tolerate a NoSchedule taint of their node.

A node may be tainted after its pods were scheduled. kube-scheduler would not place those pods
there again, but only NoExecute taints make the kubelet act; this plugin handles ``NoSchedule``
(and, with ``includePreferNoSchedule``, ``PreferNoSchedule``) taints.

Which taints count (upstream ``node_taint.go``):

- the taint's effect is NoSchedule, or PreferNoSchedule when ``includePreferNoSchedule`` is set;
- it is not excluded: ``excludedTaints`` entries are ``key`` (any value) or ``key=value``;
- it is included: with ``includedTaints`` set, only taints matching one of its entries count
  (as upstream, a present but empty list includes nothing; leaving it out includes every taint).

Pods that have finished (Succeeded or Failed) are not considered, as upstream lists a node's pods
(``ListPodsOnANode``): a completed Job pod on a tainted node is left alone. The pods of each node
are considered in listing order (``namespace/name``), or in the order of the profile's PreSort
plugins, and evicted in the order of its Sort plugins (which keep the considered order among the
pods they find equal). A pod is evicted when some counted taint of its node is tolerated by none
of its tolerations, and when the profile's evictor filters let it go. Reaching the per-node limit
moves on to the next node; reaching the total limit ends the plugin.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from desched.framework import Handle, NoGain, PredictedMove, Status
from desched.k8s import taints as k8s_taints
from desched.k8s.objects import Node, Pod, Taint
from desched.k8s.pods import occupies_node
from desched.plugins._shared import pod_selector
from desched.plugins.removepodsviolatingnodetaints.args import RemovePodsViolatingNodeTaintsArgs

log = logging.getLogger(__name__.rpartition(".")[0])  # the plugin's package: --vmodule names the folder


def _taint_matches(entries: frozenset[str], taint: Taint) -> bool:
    """Whether a ``key`` or ``key=value`` entry names ``taint`` (an empty value matches by key only)."""
    return taint.key in entries or (taint.value != "" and f"{taint.key}={taint.value}" in entries)


class RemovePodsViolatingNodeTaints:
    name: ClassVar[str] = "RemovePodsViolatingNodeTaints"
    #: The profile's PreSort plugins order the pods it considers (see the module docstring).
    presorts: ClassVar[bool] = True
    Args: ClassVar[type[RemovePodsViolatingNodeTaintsArgs]] = RemovePodsViolatingNodeTaintsArgs

    def __init__(self, args: RemovePodsViolatingNodeTaintsArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._selected = pod_selector(args.namespaces, args.label_selector)
        effects = {k8s_taints.TAINT_NO_SCHEDULE}
        if args.include_prefer_no_schedule:
            effects.add(k8s_taints.TAINT_PREFER_NO_SCHEDULE)
        self._effects = frozenset(effects)
        self._excluded = frozenset(args.excluded_taints or ())
        self._included = frozenset(args.included_taints) if args.included_taints is not None else None

    def counted_taints(self, node: Node) -> list[Taint]:
        """The taints of ``node`` this plugin enforces, in the node's order."""
        out = []
        for taint in node.spec.taints or ():
            if taint.effect not in self._effects:
                continue
            if self._excluded and _taint_matches(self._excluded, taint):
                continue
            if self._included is not None and not _taint_matches(self._included, taint):
                continue
            out.append(taint)
        return out

    def judge_move(self, move: PredictedMove) -> NoGain | None:
        """The replacement's node must carry no enforced taint the pod does not tolerate."""
        taint = k8s_taints.untolerated_taint(
            self.counted_taints(move.destination), move.pod.spec.tolerations, self._effects
        )
        if taint is None:
            return None
        return NoGain(
            "predicted_untolerated_taint",
            f"its replacement would land on {move.destination.metadata.name}, whose taint "
            f"{taint.key}{'=' + taint.value if taint.value else ''}:{taint.effect} it does not "
            "tolerate either",
        )

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        ev = self.handle.evictor
        snapshot = self.handle.snapshot
        selected = self._selected
        findings = self.handle.findings
        for node in nodes:
            taints = self.counted_taints(node)
            if not taints:
                if findings.enabled:
                    findings.node_left(node.metadata.name, "node has no taint this plugin enforces")
                continue
            violators: list[tuple[Pod, Taint]] = []
            for pod in snapshot.pods_on_node(node.metadata.name):
                if not occupies_node(pod) or not selected(pod):  # (upstream's ListPodsOnANode)
                    continue
                taint = k8s_taints.untolerated_taint(taints, pod.spec.tolerations, self._effects)
                if taint is not None:
                    violators.append((pod, taint))
                elif findings.enabled:
                    findings.left(pod, f"tolerates every enforced taint of node {node.metadata.name}")
            if not violators:
                continue
            why = {pod.key: taint for pod, taint in violators}
            # PreSort: the order the violators are considered in; Sort then decides the eviction
            # order, its ties kept in that order (so PreSort decides what a node limit leaves)
            considered = self.handle.presort_pods([pod for pod, _ in violators])

            def reason(pod: Pod, why: dict[str, Taint] = why, node: Node = node) -> str:
                taint = why[pod.key]
                return (
                    f"pod does not tolerate taint {taint.key}"
                    f"{'=' + taint.value if taint.value else ''}:{taint.effect} of node {node.metadata.name}"
                )

            if ev.evict_in_order(self.handle.sort_pods(considered), reason):
                return None
        return None


if TYPE_CHECKING:  # mypy checks the class against what it serves (upstream: var _ DeschedulePlugin = &X{})
    from desched.framework import DeschedulePlugin, HasPreSortStep, JudgesMoves

    _deschedule_plugin: type[DeschedulePlugin] = RemovePodsViolatingNodeTaints
    _judges_moves: type[JudgesMoves] = RemovePodsViolatingNodeTaints
    _has_pre_sort_step: type[HasPreSortStep] = RemovePodsViolatingNodeTaints
