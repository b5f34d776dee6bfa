"""kube-scheduler's filters as far as they are modelled, with their reasons word for word (they
make up the FitError message a Pending pod shows): NodeUnschedulable, TaintToleration,
NodeAffinity (:func:`static_failure`), NodeResourcesFit (:func:`resource_failures`),
PodTopologySpread and InterPodAffinity (their reasons; the checks are incremental, in
:mod:`.simulator`), and the FitError text (:func:`fit_error_message`).

Shared by the placement simulator and the scheduler extender (``desched extender``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from desched.k8s import affinity as k8s_affinity
from desched.k8s import taints as k8s_taints
from desched.k8s.objects import Node, Pod, Taint, Toleration
from desched.k8s.resources import CPU, EPHEMERAL_STORAGE, MEMORY

# kube-scheduler's reasons, word for word (they make up the FitError message)
R_UNSCHEDULABLE: Final = "node(s) were unschedulable"
R_NODE_AFFINITY: Final = "node(s) didn't match Pod's node affinity/selector"
R_TOO_MANY_PODS: Final = "Too many pods"
R_SPREAD: Final = "node(s) didn't match pod topology spread constraints"
R_SPREAD_LABEL: Final = "node(s) didn't match pod topology spread constraints (missing required label)"
R_AFFINITY: Final = "node(s) didn't match pod affinity rules"
R_ANTI_AFFINITY: Final = "node(s) didn't match pod anti-affinity rules"
R_EXISTING_ANTI: Final = "node(s) didn't satisfy existing pods anti-affinity rules"

#: The taint effects TaintToleration filters on.
FILTER_EFFECTS: Final = (k8s_taints.TAINT_NO_SCHEDULE, k8s_taints.TAINT_NO_EXECUTE)
#: The taint a pod must tolerate to be placed on a cordoned node.
UNSCHEDULABLE_TAINT: Final = Taint(
    key="node.kubernetes.io/unschedulable", effect=k8s_taints.TAINT_NO_SCHEDULE
)
_NOT_READY: Final = "node.kubernetes.io/not-ready"
_UNREACHABLE: Final = "node.kubernetes.io/unreachable"
#: The order NodeResourcesFit checks the basic resources in (then extended ones, by name).
_RESOURCE_ORDER: Final = {CPU: 0, MEMORY: 1, EPHEMERAL_STORAGE: 2}


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


def _taint_reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def condition_taints(node: Node) -> list[Taint]:
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


def tolerates_cordon(tolerations: Sequence[Toleration] | None) -> bool:
    """Whether NodeUnschedulable lets the pod onto a cordoned node."""
    return k8s_taints.tolerates_taint(tolerations, UNSCHEDULABLE_TAINT)


def taint_failure(taints: Sequence[Taint] | None, tolerations: Sequence[Toleration] | None) -> str:
    """TaintToleration's reason for the first NoSchedule/NoExecute taint not tolerated ("" none)."""
    taint = k8s_taints.untolerated_taint(taints, tolerations, FILTER_EFFECTS)
    return "" if taint is None else _taint_reason(taint)


def static_failure(
    pod: Pod, node: Node, *, cordon_tolerated: bool, untolerated: str, check_affinity: bool = True
) -> str:
    """NodeUnschedulable, TaintToleration and NodeAffinity, in kube-scheduler's order: the first
    reason the node fails with, "" when it passes them. ``cordon_tolerated``:
    :func:`tolerates_cordon` of the pod; ``untolerated``: :func:`taint_failure` of the node's
    taints (callers memoise both); ``check_affinity`` False when the pod has no node selector nor
    required node affinity (it then passes NodeAffinity anywhere)."""
    if node.spec.unschedulable and not cordon_tolerated:
        return R_UNSCHEDULABLE
    if untolerated:
        return untolerated
    if check_affinity and not k8s_affinity.pod_matches_node_selector(pod, node):
        return R_NODE_AFFINITY
    return ""


def resource_failures(
    free_pods: int, requests: Iterable[tuple[str, int]], free: Callable[[str], int]
) -> list[str]:
    """NodeResourcesFit's reasons: ``Too many pods`` when the node has no pod slot left, then
    ``Insufficient <resource>`` for each requested resource (``requests``: positive amounts)
    above what the node has ``free``, cpu, memory and ephemeral storage first, then by name."""
    out = [R_TOO_MANY_PODS] if free_pods <= 0 else []
    for name, amount in sorted(requests, key=lambda r: (_RESOURCE_ORDER.get(r[0], 3), r[0])):
        if amount > 0 and amount > free(name):
            out.append(f"Insufficient {name}")
    return out
